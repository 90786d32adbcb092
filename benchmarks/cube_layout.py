"""The cube's file layout: pixel- against band-interleaved tiles, and band-interleaved without the
horizontal predictor, written and read side by side.

A cube is built by ``lcflow cube`` from synthetic scenes (``cube_whole_tile.make_catalog``: smooth fields
plus noise, about a tenth cloud), then its bands are written again window by window as the cube stage
writes them (``raster.staging_profile``: 256 px tiles, ZSTD level 1, horizontal predictor) in each
layout, and read back as the later stages read them: by windows of every band (sampling, prediction)
and pixel by pixel (a pixel's series).
CPU seconds of this process, alternating the layouts over ``--rounds``; sizes in MB.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio
from rasterio.windows import Window

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cube_whole_tile  # noqa: E402

from lcflow.common.raster import Grid, staging_profile  # noqa: E402
from lcflow.retrieve import cube, mgrs, remote, search  # noqa: E402
from lcflow.retrieve.cube_settings import CubeSettings  # noqa: E402


def build_cube(work: Path, size: int, dates: int) -> Path:
    catalog = cube_whole_tile.make_catalog(work / "catalog", size, dates)
    items = work / "items.json"
    search.run(cube_whole_tile.TILE, 2018, items, catalog=str(catalog))
    xmin, _, _, ymax = mgrs.tile_bounds(cube_whole_tile.TILE)
    out = work / "cube.tif"
    cube.run(items, cube_whole_tile.TILE, 2018, out, work / "valid.tif",
             CubeSettings(bands=cube_whole_tile.BANDS, block_px=cube_whole_tile.BLOCK),
             bounds=[xmin, ymax - size * 10.0, xmin + size * 10.0, ymax], network=remote.Network(signing="none"))
    return out


#: layout -> (interleaving, TIFF predictor); "band" is the cube stage's
LAYOUTS = {"pixel": ("pixel", 2), "band": ("band", 2), "band, no predictor": ("band", 1)}


def write(data: np.ndarray, profile: dict, path: Path, layout: str, block: int) -> float:
    """CPU seconds to write ``data`` window by window, as the cube stage does."""
    interleave, predictor = LAYOUTS[layout]
    start = time.process_time()
    with rasterio.open(path, "w", **{**profile, "interleave": interleave, "predictor": predictor}) as dst:
        for row in range(0, data.shape[1], block):
            for col in range(0, data.shape[2], block):
                part = np.ascontiguousarray(data[:, row:row + block, col:col + block])
                dst.write(part, window=Window(col, row, part.shape[2], part.shape[1]))
    return time.process_time() - start


def read_windows(path: Path, block: int) -> float:
    start = time.process_time()
    with rasterio.open(path) as ds:
        for row in range(0, ds.height, block):
            for col in range(0, ds.width, block):
                ds.read(window=Window(col, row, min(block, ds.width - col), min(block, ds.height - row)))
    return time.process_time() - start


def read_pixels(path: Path, points: np.ndarray) -> float:
    """A pixel's whole series at each point, with a block cache too small to keep the cube."""
    start = time.process_time()
    with rasterio.Env(GDAL_CACHEMAX=64 * 2**20), rasterio.open(path) as ds:
        for row, col in points:
            ds.read(window=Window(int(col), int(row), 1, 1))
    return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=2048, help="cube side in px")
    ap.add_argument("--dates", type=int, default=6, help="scenes in the year")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--points", type=int, default=500, help="single pixels read")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        built = build_cube(work, args.size, args.dates)
        with rasterio.open(built) as src:
            data, nodata = src.read(), src.nodata
        profile = staging_profile(Grid.of(built), data.shape[0], data.dtype.name, nodata)  # as the cube stage writes
        points = np.random.default_rng(0).integers(0, args.size, (args.points, 2))
        print(f"cube of {data.shape[0]} int16 bands, {args.size} x {args.size} px, {data.nbytes / 2**20:.0f} MiB raw; "
              f"CPU seconds", flush=True)
        results: dict[str, list[tuple[float, ...]]] = {layout: [] for layout in LAYOUTS}
        for _ in range(args.rounds):
            for layout in results:
                path = work / f"{layout.replace(', ', '_').replace(' ', '_')}.tif"
                row = (write(data, profile, path, layout, cube_whole_tile.BLOCK), path.stat().st_size / 1e6,
                       read_windows(path, cube_whole_tile.BLOCK), read_windows(path, 64), read_pixels(path, points))
                results[layout].append(row)
                print(f"  {layout:18s}: write {row[0]:5.2f} s, {row[1]:6.1f} MB; read by {cube_whole_tile.BLOCK} px "
                      f"windows {row[2]:5.2f} s, by 64 px windows {row[3]:5.2f} s, {args.points} single pixels {row[4]:5.2f} s",
                      flush=True)
        median = {k: np.median(np.array(v), axis=0) for k, v in results.items()}
        for layout, base in (("band", "pixel"), ("band, no predictor", "band")):
            a, b = median[layout], median[base]
            print(f"{layout} / {base} (medians): write {a[0] / b[0]:.2f}, size {a[1] / b[1]:.2f}, read by windows "
                  f"{a[2] / b[2]:.2f} and {a[3] / b[3]:.2f}, single pixels {a[4] / b[4]:.2f}")


if __name__ == "__main__":
    main()
