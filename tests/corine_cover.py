"""A coarse CORINE-like raster over whole MGRS tiles, for plans of real-size configurations (the config
checks refuse a CORINE raster that does not cover a tile): tests and benchmarks/slurm_dryrun.py."""

from pathlib import Path

import numpy as np
import rasterio
from pyproj import Transformer
from rasterio.transform import from_origin

from lcflow.retrieve import mgrs


def corine_over(tiles: list[str], path: Path) -> None:
    """A coarse CORINE-like raster (grid codes) in EPSG:3035 that covers every tile, as the real one does."""
    xs, ys = [], []
    for tile in tiles:
        x0, y0, x1, y1 = mgrs.tile_bounds(tile)
        to_laea = Transformer.from_crs(mgrs.tile_epsg(tile), 3035, always_xy=True)
        for x in (x0, x1):
            for y in (y0, y1):
                a, b = to_laea.transform(x, y)
                xs.append(a)
                ys.append(b)
    res = 1000.0
    left, top = np.floor(min(xs) / res) * res - 5 * res, np.ceil(max(ys) / res) * res + 5 * res
    width, height = int((max(xs) - left) / res) + 10, int((top - min(ys)) / res) + 10
    codes = np.random.default_rng(0).choice(np.array([2, 12, 18, 23, 41], dtype=np.uint8), (height, width))
    path.parent.mkdir(parents=True)
    with rasterio.open(path, "w", driver="GTiff", width=width, height=height, count=1, dtype="uint8",
                       crs="EPSG:3035", transform=from_origin(left, top, res, res), nodata=48) as dst:
        dst.write(codes, 1)
