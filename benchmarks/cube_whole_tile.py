"""lcflow cube on a whole Sentinel-2 tile: from local disk and over HTTP, with 1 and 2 reading threads,
against a plain windowed read of the same bytes.

Synthetic scenes the size of a real tile (10980 x 10980 px for the 10 m bands B02 B03 B04 B08,
5490 x 5490 for the 20 m bands and SCL; tiled 1024 px, DEFLATE, as Earth Search's COGs) over
``--dates`` dates, in a static STAC catalog with Earth Search's asset keys. Each variant runs in its
own process (its own peak RSS) and prints wall time, pixels per second and peak RSS; the overhead
ratio is cube time over the time a plain rasterio read of the same assets and windows takes (the
pixels read and discarded). The HTTP variants read through a loopback server with byte ranges
(tests/http_server.py). ``--size`` shrinks the tile (a multiple of 2) for a quicker run. The CPU
seconds of each process (with its threads) are printed too, and ``--json`` writes them for
``seed_study.py`` (``--cube-figures``: the cube's CPU a pixel and scene, from a whole tile). With
``--against REV`` the cube of that git revision of lcflow runs too, in turns with this one on the same
scenes, and the two cubes are compared pixel for pixel: the speed-up is a ratio of one run.

With ``--odc-stac`` the cube whose every asset odc-stac reads (``odc.stac.load`` of each window, GDAL's warper)
runs too, side by side: the figure behind reading the assets as stored.

    python benchmarks/cube_whole_tile.py [--size 2048] [--dates 24] [--sources local] [--threads 1] [--against HEAD~1] [--odc-stac]
"""

import argparse
import datetime as dt
import json
import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pystac
import rasterio
from pyproj import Transformer
from rasterio.transform import from_origin

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.http_server

from shared import lcflow_versions, raster_digest, run_cpu_s  # noqa: E402

from lcflow.common.raster import Grid  # noqa: E402
from lcflow.defaults import default  # noqa: E402
from lcflow.retrieve import mgrs  # noqa: E402
from lcflow.retrieve.cube_settings import CubeSettings  # noqa: E402
from lcflow.retrieve.sentinel2 import BAND_RESOLUTION, EARTH_SEARCH_KEYS  # noqa: E402

TILE = "31UFT"
BANDS = ["B02", "B03", "B04", "B05", "B06", "B07", "B08", "B8A", "B11", "B12"]
BLOCK = 512  # the cube's processing window (cube.block_px)


def write_band(path: Path, size: int, left: float, top: float, res: float, epsg: int, seed: int, scl: bool) -> None:
    """A band of smooth fields plus noise (compresses like real data), written strip by strip."""
    rng = np.random.default_rng(seed)
    profile = dict(driver="GTiff", width=size, height=size, count=1, dtype="uint8" if scl else "uint16", nodata=0,
                   crs=f"EPSG:{epsg}", transform=from_origin(left, top, res, res), tiled=True, blockxsize=1024,
                   blockysize=1024, compress="deflate", predictor=2 if not scl else 1)
    with rasterio.open(path, "w", **profile) as dst:
        for row in range(0, size, 1024):
            h = min(1024, size - row)
            coarse = rng.integers(300, 4000, size=((h + 31) // 32, (size + 31) // 32))
            field = np.kron(coarse, np.ones((32, 32), dtype=np.int64))[:h, :size]
            if scl:
                data = np.where(field > 3600, 9, 4).astype(np.uint8)  # about a tenth cloud
            else:
                data = (field + rng.integers(-50, 50, size=(h, size))).astype(np.uint16)
            dst.write(data, 1, window=rasterio.windows.Window(0, row, size, h))


def make_catalog(out: Path, size: int, dates: int) -> Path:
    """``dates`` scenes of the tile's top-left ``size`` px square, as a static STAC catalog."""
    epsg = mgrs.tile_epsg(TILE)
    xmin, _, _, ymax = mgrs.tile_bounds(TILE)
    catalog = pystac.Catalog("bench", "synthetic whole-tile scenes")
    for d in range(dates):
        day = dt.datetime(2018, 1, 5, 10, 50, tzinfo=dt.timezone.utc) + dt.timedelta(days=d * 350 // dates)
        item_id = f"S2A_{TILE}_{day:%Y%m%d}_0_L2A"
        folder = out / item_id
        folder.mkdir(parents=True)
        extent = size * 10.0
        to_lonlat = Transformer.from_crs(epsg, 4326, always_xy=True)
        ring = [list(to_lonlat.transform(x, y)) for x, y in
                [(xmin, ymax), (xmin + extent, ymax), (xmin + extent, ymax - extent), (xmin, ymax - extent), (xmin, ymax)]]
        lons, lats = [p[0] for p in ring], [p[1] for p in ring]
        item = pystac.Item(item_id, {"type": "Polygon", "coordinates": [ring]}, [min(lons), min(lats), max(lons), max(lats)],
                           day, {"grid:code": f"MGRS-{TILE}", "proj:epsg": epsg, "s2:processing_baseline": "02.14",
                                 "eo:cloud_cover": 10.0})
        for i, band in enumerate([*BANDS, "SCL"]):
            res = float(BAND_RESOLUTION[band])
            px = int(round(extent / res))
            path = folder / f"{band}.tif"
            write_band(path, px, xmin, ymax, res, epsg, seed=d * 100 + i, scl=band == "SCL")
            item.add_asset(EARTH_SEARCH_KEYS[band], pystac.Asset(
                href=str(path), media_type=pystac.MediaType.COG, roles=["data"],
                extra_fields={"proj:shape": [px, px], "proj:transform": [res, 0, xmin, 0, -res, ymax]}))
        catalog.add_item(item)
    catalog.normalize_hrefs(str(out))
    catalog.make_all_asset_hrefs_relative()
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    return out / "catalog.json"


def cube_child(catalog: str, work: str, threads: int, size: int, cache_mb: int) -> dict:
    from lcflow.retrieve import cube, remote, search

    items = Path(work) / "items.json"
    search.run(TILE, 2018, items, catalog=catalog)
    xmin, _, _, ymax = mgrs.tile_bounds(TILE)
    bounds = [xmin, ymax - size * 10.0, xmin + size * 10.0, ymax]
    cube.run(items, TILE, 2018, Path(work) / "cube.tif", Path(work) / "valid.tif",
             CubeSettings(bands=BANDS, block_px=BLOCK, read_threads=threads, cache_mb=cache_mb), bounds=bounds,
             network=remote.Network(signing="none"))
    return {}


def odc_stac_child(catalog: str, work: str, threads: int, size: int, cache_mb: int) -> dict:
    """The cube with every asset read by odc-stac (``odc.stac.load`` of each window, GDAL's warper), as
    lcflow reads the assets that are not on a grid of the tile's CRS: the reader lcflow would have if it
    used odc-stac alone."""
    from lcflow.retrieve import scene_files

    scene_files._native_grids = lambda *args: {}
    return cube_child(catalog, work, threads, size, cache_mb)


def plain_child(catalog: str, work: str, threads: int, size: int, cache_mb: int) -> dict:
    """The same assets and windows as the cube reads (the bands exactly, SCL with the mask's 1 px halo, each
    cut to the file),
    in the same order, from files kept open as the cube keeps them, with the same block cache, read with
    rasterio and discarded."""
    from lcflow.retrieve import block_cache, search

    items = Path(work) / "items.json"
    search.run(TILE, 2018, items, catalog=catalog)
    manifest = search.read_manifest(items)
    hrefs = [(i.assets[EARTH_SEARCH_KEYS[b]].href, b == "SCL") for i in manifest for b in [*BANDS, "SCL"]]
    grid = Grid(f"EPSG:{mgrs.tile_epsg(TILE)}", from_origin(0, 0, 10, 10), size, size)
    with rasterio.Env(GDAL_DISABLE_READDIR_ON_OPEN="EMPTY_DIR"):
        sources = [(rasterio.open(h), scl) for h, scl in hrefs]
        # the block cache the cube job takes
        blocks = sum(s.block_shapes[0][0] * s.block_shapes[0][1] * np.dtype(s.dtypes[0]).itemsize for s, _ in sources)
        need = block_cache.block_cache_bytes(blocks // len(manifest), len(manifest), block_cache.window_bytes(BLOCK, 12, len(BANDS)))
        cache = block_cache.block_cache_size(need, cache_mb)

        def read(args) -> int:
            (src, scl), win = args
            f, halo = src.width / size, 1 if scl else 0  # f: 0.5 for 20 m bands
            w = rasterio.windows.Window(int((win.col_off - halo) * f), int((win.row_off - halo) * f),
                                        int((win.width + 2 * halo) * f), int((win.height + 2 * halo) * f))
            # the part inside the file, read plainly as the cube reads it (a boundless read goes through a
            # warped VRT, several times the CPU of the same pixels)
            inside = w.intersection(rasterio.windows.Window(0, 0, src.width, src.height))
            return int(src.read(1, window=inside).size)

        with rasterio.Env(GDAL_CACHEMAX=cache), ThreadPoolExecutor(threads) as pool:
            for win in grid.windows(BLOCK, "z"):
                sum(pool.map(read, [(s, win) for s in sources]))
        for s, _ in sources:
            s.close()
    return {}


def child(variant: str, catalog: str, work: str, threads: int, size: int, cache_mb: int) -> None:
    {"cube": cube_child, "odc-stac": odc_stac_child, "plain": plain_child}[variant](catalog, work, threads, size,
                                                                                 cache_mb)
    print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def measure(variant: str, catalog: str, threads: int, size: int, cache_mb: int, scratch: Path,
            workflow: Path | None = None) -> dict:
    """One variant in a process of its own (the cube with the lcflow in ``workflow``, by default this
    one); a cube's pixels are digested after the process ends, outside its CPU time."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(workflow or ""), os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory(dir=scratch) as work:
        start = time.perf_counter()
        done, cpu_s = run_cpu_s([sys.executable, __file__, "--child", variant, catalog, work, str(threads), str(size),
                                 str(cache_mb)], capture_output=True, text=True, env=env)
        wall = time.perf_counter() - start
        digest = raster_digest([Path(work) / "cube.tif", Path(work) / "valid.tif"]) if variant != "plain" else None
    return {"wall_s": wall, "cpu_s": cpu_s, "px_s": size * size / wall, "digest": digest,
            **json.loads(done.stdout.strip().splitlines()[-1])}


def median_of(runs: list[dict]) -> dict:
    """The run of median CPU time (the first of two), with every run's CPU seconds."""
    ranked = sorted(runs, key=lambda r: r["cpu_s"])
    return {**ranked[(len(ranked) - 1) // 2], "cpu_s_each": [r["cpu_s"] for r in runs]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=10980, help="tile side in px at 10 m (even)")
    ap.add_argument("--dates", type=int, default=6, help="scenes in the year")
    ap.add_argument("--threads", default="1,2", help="reading threads to compare")
    ap.add_argument("--work", default=None, help="folder for the scenes (a whole tile at 6 dates needs ~5 GB)")
    ap.add_argument("--cache-mb", type=int, default=default("cube.cache_mb"), help="cube.cache_mb (the block cache's limit)")
    ap.add_argument("--sources", default="local,http", help="where the scenes are read from: local, http or both")
    ap.add_argument("--rss-limit-mb", type=int, default=4096, help="the cube's peak RSS must stay under this")
    ap.add_argument("--json", type=Path, help="also write each variant's figures to this file (seed_study.py's "
                    "--cube-figures)")
    ap.add_argument("--against", help="a git revision of lcflow whose cube runs side by side, in turns (compared)")
    ap.add_argument("--rounds", type=int, default=1, help="turns of each variant (the median is printed)")
    ap.add_argument("--odc-stac", action="store_true", help="also the cube with every asset read by odc-stac "
                    "(odc.stac.load of each window), side by side: why lcflow reads the assets as stored")
    ap.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        variant, catalog, work, threads, size, cache_mb = args.child
        child(variant, catalog, work, int(threads), int(size), int(cache_mb))
        return
    from tests.http_server import serve

    threads = [int(t) for t in args.threads.split(",")]
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        catalog = make_catalog(tmp / "catalog", args.size, args.dates)
        gb = sum(p.stat().st_size for p in (tmp / "catalog").rglob("*.tif")) / 2**30
        print(f"{args.dates} dates of a {args.size} x {args.size} px tile written in {time.perf_counter() - start:.0f} s "
              f"({gb:.1f} GiB of GeoTIFFs); cube windows of {BLOCK} px, block cache at most {args.cache_mb} MB; "
              f"medians of {args.rounds} turn(s)", flush=True)
        rows = []
        with lcflow_versions(args.against, tmp / "against") as versions, serve(tmp / "catalog") as server:
            sources = {"local": ("local disk", str(catalog)), "http": ("loopback HTTP", f"{server.url}/catalog.json")}
            for where, cat in (sources[s] for s in args.sources.split(",")):
                for n in threads:
                    runs = {"plain": [], **{name: [] for name in versions}}
                    odc: list[dict] = []
                    for _ in range(args.rounds):
                        runs["plain"].append(measure("plain", cat, n, args.size, args.cache_mb, tmp))
                        for name, workflow in versions.items():
                            runs[name].append(measure("cube", cat, n, args.size, args.cache_mb, tmp, workflow))
                        if args.odc_stac:
                            odc.append(measure("odc-stac", cat, n, args.size, args.cache_mb, tmp))
                    plain, cubes = median_of(runs.pop("plain")), {name: median_of(r) for name, r in runs.items()}
                    if odc:
                        warped, ours = median_of(odc), cubes["this"]
                        print(f"  {where:13s} {n} thread(s) odc-stac: cube {warped['wall_s']:7.1f} s "
                              f"({warped['px_s']:8.0f} px/s, {warped['cpu_s']:.1f} CPU s, peak RSS "
                              f"{warped['peak_rss_mb']:5.0f} MB); lcflow's reader {warped['wall_s'] / ours['wall_s']:.2f}x "
                              f"as fast (CPU {warped['cpu_s'] / ours['cpu_s']:.2f}x); cubes "
                              f"{'identical' if warped['digest'] == ours['digest'] else 'DIFFERENT'}", flush=True)
                    rows.append((where, n, cubes["this"], plain))
                    for name, built in cubes.items():
                        print(f"  {where:13s} {n} thread(s) {name:>8}: cube {built['wall_s']:7.1f} s "
                              f"({built['px_s']:8.0f} px/s, {built['cpu_s']:.1f} CPU s, peak RSS "
                              f"{built['peak_rss_mb']:5.0f} MB); plain read {plain['wall_s']:7.1f} s "
                              f"({plain['cpu_s']:.1f} CPU s, peak RSS {plain['peak_rss_mb']:5.0f} MB); overhead ratio "
                              f"{built['wall_s'] / plain['wall_s']:.2f} (CPU {built['cpu_s'] / plain['cpu_s']:.2f})",
                              flush=True)
                    if args.against:
                        same = {r["digest"] for rs in runs.values() for r in rs}
                        print(f"  {where:13s} {n} thread(s): this cube {cubes[args.against]['cpu_s'] / cubes['this']['cpu_s']:.2f}x "
                              f"as fast as {args.against}'s in CPU; cubes {'identical' if len(same) == 1 else 'DIFFERENT'}",
                              flush=True)
    if args.json:
        args.json.write_text(json.dumps({"size": args.size, "dates": args.dates, "cores": len(os.sched_getaffinity(0)),
                                         "runs": [{"source": w, "threads": n, "cube": c, "plain": p}
                                                  for w, n, c, p in rows]}, indent=1))
    worst = max(r[2]["peak_rss_mb"] for r in rows)
    print(f"\nlargest cube peak RSS {worst:.0f} MB (limit {args.rss_limit_mb} MB)")
    if worst > args.rss_limit_mb:
        sys.exit(f"peak RSS over {args.rss_limit_mb} MB")


if __name__ == "__main__":
    main()
