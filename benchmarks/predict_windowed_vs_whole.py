"""lcflow predict (window by window) against a naive whole-array read-then-predict, on the same cube.

Each variant runs in its own process so its peak memory (max RSS) is its own; both use the same model
and cube and must produce the same map. Prints wall time and peak memory of each and their ratios.
"""

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio
from shared import demo_cube

from lcflow.common.raster import Grid, read_tag, write_cog
from lcflow.train import training


def naive(model_dir: str, cube_path: str, out: str) -> None:
    """Read the whole cube, predict every pixel at once, write one GeoTIFF."""
    from lcflow.maps.map_windows import cube_features
    from lcflow.train.model_dirs.model_dir import TrainedModel

    trained = TrainedModel.load(model_dir)
    with rasterio.open(cube_path) as src:
        data, profile = src.read(), src.profile
    steps = len(read_tag(cube_path, "time_steps"))
    x = cube_features(data, steps, trained.bands, read_tag(cube_path, "bands"))
    codes, _, empty = trained.predict(x)
    out_map = np.where(empty, 255, codes).astype(np.uint8).reshape(profile["height"], profile["width"])
    profile.update(count=1, dtype="uint8", nodata=255, driver="GTiff")
    with rasterio.open(out, "w", **profile) as dst:
        dst.write(out_map, 1)


def windowed(model_dir: str, cube_path: str, out: str) -> None:
    from lcflow.maps import predict

    predict.run(model_dir, cube_path, out, out.replace(".tif", "_confidence.tif"), block=256)


def measure(variant: str, model_dir: Path, cube_path: Path, out: Path) -> dict:
    """Run one variant in a child process; wall seconds and peak RSS of that child."""
    start = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--child", variant, str(model_dir), str(cube_path), str(out)], check=True)
    wall = time.perf_counter() - start
    return {"wall_s": wall, "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def prepare(work: Path, repeat: int) -> tuple[Path, Path]:
    """Demo scenes -> cube -> samples -> RF; the cube tiled ``repeat`` x ``repeat`` times to a larger one."""
    small, samples = demo_cube(work)
    training.train("rf", [str(samples)], work / "rf", {"n_estimators": 100})
    with rasterio.open(small) as src:
        data, tags, names = src.read(), src.tags(), list(src.descriptions)
    big = np.tile(data, (1, repeat, repeat))
    g = Grid.of(small)
    big_grid = Grid(g.crs, g.transform, g.width * repeat, g.height * repeat)
    write_cog(work / "big_cube.tif", big, big_grid, nodata=-32768, descriptions=names,
              tags={k: json.loads(v) if k in ("bands", "time_steps") else v for k, v in tags.items() if k != "AREA_OR_POINT"})
    return work / "rf", work / "big_cube.tif"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=4, help="the 256 px demo cube is tiled repeat x repeat times")
    ap.add_argument("--child", nargs=4, metavar=("VARIANT", "MODEL", "CUBE", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        variant, model_dir, cube_path, out = args.child
        {"naive": naive, "windowed": windowed}[variant](model_dir, cube_path, out)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_dir, big = prepare(work, args.repeat)
        with rasterio.open(big) as ds:
            size = f"{ds.width} x {ds.height} px, {ds.count} bands"
        # RUSAGE_CHILDREN's max RSS is the largest child so far: measure the smaller expected peak first
        w = measure("windowed", model_dir, big, work / "windowed.tif")
        n = measure("naive", model_dir, big, work / "naive.tif")
        with rasterio.open(work / "windowed.tif") as a, rasterio.open(work / "naive.tif") as b:
            same = bool(np.array_equal(a.read(1), b.read(1)))
    print(f"predict on a cube of {size} (RF, 100 trees), one process each, same machine, same run")
    print(f"  windowed lcflow predict : {w['wall_s']:7.1f} s  peak RSS {w['peak_rss_mb']:8.0f} MB")
    print(f"  naive whole-array       : {n['wall_s']:7.1f} s  peak RSS {n['peak_rss_mb']:8.0f} MB")
    print(f"  speed ratio naive/windowed (time)  : {n['wall_s'] / w['wall_s']:.2f}")
    print(f"  memory ratio naive/windowed (peak) : {n['peak_rss_mb'] / w['peak_rss_mb']:.2f}")
    print(f"  identical maps: {same}")
    if not same:
        sys.exit("the two variants disagree")


if __name__ == "__main__":
    main()
