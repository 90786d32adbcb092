"""CORINE onto a whole Sentinel-2 tile grid (10980 x 10980 px at 10 m): ``lcflow.labels.alignment.clc_on_grid``
against ``gdalwarp -r near`` on the same input and target grid, in one run.

The input is CORINE-like: EPSG:3035, 100 m, grid codes 1..44 in patches of a few hundred metres, 48 as
nodata, covering tile 31UFT with a margin. Prints both times, their ratio (target <= 1.2) and the share
of identical pixels. With ``--json`` the whole ``lcflow labels`` job (the labels rule's command: the
alignment, its checks and the COG written) also runs on the tile, ``--repeats`` times, each in its own
process, and its CPU seconds are written for ``seed_study.py``.

Usage: python benchmarks/labels_vs_gdalwarp.py [--repeats 3] [--json FILE]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio
from rasterio.warp import transform_bounds
from scipy import ndimage

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

from shared import run_cpu_s  # noqa: E402

from lcflow.common.raster import Grid  # noqa: E402
from lcflow.labels import alignment as labels  # noqa: E402
from lcflow.labels import nomenclature  # noqa: E402
from lcflow.retrieve import mgrs  # noqa: E402

TILE = Grid.from_bounds(mgrs.tile_epsg("31UFT"), mgrs.tile_bounds("31UFT"), 10)


def corine_like(path: Path) -> None:
    left, bottom, right, top = transform_bounds(TILE.crs, "EPSG:3035", *TILE.bounds)
    left, bottom = np.floor(left / 100) * 100 - 2000, np.floor(bottom / 100) * 100 - 2000
    width, height = int((right - left) / 100) + 40, int((top - bottom) / 100) + 40
    rng = np.random.default_rng(0)
    seeds = rng.integers(1, 45, size=(height // 4 + 1, width // 4 + 1)).astype(np.uint8)
    codes = np.kron(seeds, np.ones((4, 4), np.uint8))[:height, :width]
    codes = ndimage.median_filter(codes, size=3)
    codes[:, :5] = 48
    profile = {"driver": "GTiff", "width": width, "height": height, "count": 1, "dtype": "uint8", "nodata": 48,
               "crs": "EPSG:3035", "transform": rasterio.transform.from_origin(left, top + 4000, 100, 100),
               "tiled": True, "compress": "deflate"}
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(codes, 1)


def grid_raster(path: Path) -> None:
    """A one-band raster on the whole tile's grid, no pixel written: what ``lcflow labels --grid`` reads
    of a cube (its grid) without the cube's bytes."""
    profile = {"driver": "GTiff", "width": TILE.width, "height": TILE.height, "count": 1, "dtype": "uint8",
               "crs": TILE.crs, "transform": TILE.transform, "tiled": True, "compress": "deflate", "sparse_ok": True}
    with rasterio.open(path, "w", **profile):
        pass


def labels_job(src: Path, grid: Path, out: Path) -> float:
    """CPU seconds of ``lcflow labels`` as the labels rule runs it, in its own process."""
    _, cpu_s = run_cpu_s([str(Path(sys.executable).parent / "lcflow"), "labels", "--corine", str(src), "--grid",
                          str(grid), "--out", str(out)], capture_output=True)
    out.unlink()
    return cpu_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also run the whole ``lcflow labels`` job on the tile --repeats times "
                    "and write its CPU seconds to this file (seed_study.py's --labels-figures)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "clc_3035.tif", Path(tmp) / "gdal.tif"
        corine_like(src)
        ours_s, theirs_s = [], []
        for _ in range(args.repeats):  # alternate, so both see the same machine state
            started = time.perf_counter()
            ours = labels.clc_on_grid(src, TILE)
            ours_s.append(time.perf_counter() - started)
            left, bottom, right, top = TILE.bounds
            started = time.perf_counter()
            subprocess.run(["gdalwarp", "-q", "-overwrite", "-r", "near", "-t_srs", "EPSG:32631", "-te", str(left),
                            str(bottom), str(right), str(top), "-tr", "10", "10", "-co", "TILED=YES", str(src), str(out)],
                           check=True)
            with rasterio.open(out) as ds:
                theirs = nomenclature.clc_codes_from_raster(ds.read(1), ds.nodata, where=str(out))
            theirs_s.append(time.perf_counter() - started)
        same = float((ours == theirs).mean())
        if args.json:
            grid_raster(Path(tmp) / "grid.tif")
            job_s = [labels_job(src, Path(tmp) / "grid.tif", Path(tmp) / "labels.tif") for _ in range(args.repeats)]
            args.json.write_text(json.dumps({"px": TILE.width * TILE.height, "cpu_s_each": job_s,
                                             "cpu_s": float(np.median(job_s))}, indent=1))
    a, b = float(np.median(ours_s)), float(np.median(theirs_s))
    print(f"tile grid {TILE.width} x {TILE.height} px from a 100 m EPSG:3035 raster, median of {args.repeats}")
    print(f"lcflow clc_on_grid {a:.2f} s, gdalwarp -r near (+ read and decode) {b:.2f} s, ratio {a / b:.2f} "
          f"(target <= 1.2); identical pixels {same:.5f}")
    if args.json:
        print(f"the whole lcflow labels job: {', '.join(f'{v:.1f}' for v in job_s)} CPU s ({args.json.name})")


if __name__ == "__main__":
    main()
