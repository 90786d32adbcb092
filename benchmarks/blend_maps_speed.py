"""What a blend's map costs beyond its members' (``lcflow blend-maps``, the ``predict_blend`` rule): two
members' stored probabilities (uint8, one band a class, as ``lcflow predict`` writes them) averaged into the
blend's map, confidence and probabilities, against reading the same rasters alone, on grids of growing side;
the whole-tile (10980 px) time this implies.

    python benchmarks/blend_maps_speed.py [--sides 1024,2048,4096] [--classes 12] [--block 256]
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio
from rasterio.transform import from_origin

from lcflow.common.raster import Grid
from lcflow.maps import blend_maps, predict
from lcflow.train.model_dirs import blend

TILE = 10980


def member_raster(path: Path, side: int, classes: list[int], model: str, seed: int) -> None:
    """Random class probabilities stored as lcflow predict stores them (tiled, DEFLATE, tags)."""
    rng = np.random.default_rng(seed)
    profile = {"driver": "GTiff", "dtype": "uint8", "count": len(classes), "width": side, "height": side,
               "crs": "EPSG:32631", "transform": from_origin(600000, 5800000, 10, 10), "nodata": 255,
               "tiled": True, "blockxsize": 256, "blockysize": 256, "compress": "deflate"}
    with rasterio.open(path, "w", **profile) as dst:
        dst.update_tags(model=model, class_codes=str(classes))
        for row in range(0, side, 1024):
            h = min(1024, side - row)
            raw = rng.gamma(0.3, size=(len(classes), h, side)).astype(np.float32)
            stored = np.round(raw / raw.sum(axis=0) * predict.PROBABILITY_SCALE).astype(np.uint8)
            dst.write(stored, window=rasterio.windows.Window(0, row, side, h))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sides", default="1024,2048,4096")
    ap.add_argument("--classes", type=int, default=12)
    ap.add_argument("--block", type=int, default=256)
    a = ap.parse_args()
    classes = list(range(11, 11 + a.classes))
    described = blend.BlendedModel(blend.Blend([], ["rf", "tempcnn"]), ["B04"], 12, classes,
                                   {c: str(c) for c in classes}, {c: (c, c, c) for c in classes}, None)
    print(f"# {os.cpu_count()} cores; two members, {a.classes} classes, windows of {a.block} px")
    print(f"{'side':>6} {'read only px/s':>15} {'blend-maps px/s':>16} {'ratio':>6} {'whole tile (min)':>17}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for side in map(int, a.sides.split(",")):
            paths = [tmp / f"{m}_{side}.tif" for m in ("rf", "tempcnn")]
            for i, (p, m) in enumerate(zip(paths, ("rf", "tempcnn"))):
                member_raster(p, side, classes, m, i)
            grid = Grid.of(paths[0])
            started = time.perf_counter()
            for p in paths:
                with rasterio.open(p) as src:
                    for win in grid.windows(a.block):
                        src.read(window=win)
            read_s = time.perf_counter() - started
            started = time.perf_counter()
            predict.publish(described, grid, blend_maps._windows(paths, grid, a.block, classes, True),
                            tmp / "map.tif", tmp / "conf.tif", tmp / "proba.tif")
            blend_s = time.perf_counter() - started
            px = side * side
            print(f"{side:>6} {px / read_s:>15,.0f} {px / blend_s:>16,.0f} {blend_s / read_s:>6.1f} "
                  f"{TILE * TILE / (px / blend_s) / 60:>17.1f}", flush=True)


if __name__ == "__main__":
    main()
