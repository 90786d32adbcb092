"""``lcflow search`` and ``lcflow cube``: the scenes of a tile-year, and their composites on a time grid."""

import argparse
import logging
import math

from lcflow.common import cli_args, path_guard
from lcflow.defaults import default
from lcflow.retrieve.cube_settings import CubeSettings
from lcflow.retrieve.remote import SIGNING_CHOICES

log = logging.getLogger("lcflow")


def cmd_search(a):
    from lcflow.retrieve import search

    n = search.run(a.tile, a.year, a.out, catalog=a.catalog, api=a.api, collection=a.collection,
                   max_cloud_cover=a.max_cloud_cover)
    log.info("%s %s: %d items -> %s", a.tile, a.year, n, a.out)


def cmd_cube(a):
    from lcflow.retrieve import cube, remote

    network = remote.Network(timeout_s=a.http_timeout, retries=a.http_retries, retry_delay_s=a.http_retry_delay,
                             s3_endpoint=a.s3_endpoint, signing=a.signing)
    grid = cube.run(a.items, a.tile, a.year, a.out, a.valid, CubeSettings.from_options(a), bounds=a.bounds,
                    network=network)
    log.info("%s %s: cube %d x %d px (%s) -> %s", a.tile, a.year, grid.width, grid.height, grid.crs, a.out)
    if a.unstage:
        from lcflow.retrieve import stage_in

        stage_in.remove_staged(a.items, a.unstage)


def cmd_stage(a):
    from lcflow.retrieve import download, sentinel2, stage_in

    settings = download.Settings(timeout_s=a.http_timeout, retries=a.http_retries, retry_delay_s=a.http_retry_delay)
    n = stage_in.run(a.items, a.tile, a.year, sentinel2.check_bands(a.bands.split(",")), a.dir, a.out,
                     connections=a.connections, settings=settings, signing=a.signing, copy_local=a.copy_local,
                     bounds=a.bounds, dry_run=a.dry_run)
    if not a.dry_run:
        log.info("%s %s: %d files staged -> %s", a.tile, a.year, n, a.out)


def _network_options(p) -> None:
    """The options of a command that reads remote scenes: signing, timeouts and retries."""
    p.add_argument("--signing", choices=SIGNING_CHOICES, default=default("stac.signing"),
                   help="sign asset URLs before reading (auto: Planetary Computer items are signed)")
    p.add_argument("--http-timeout", **cli_args.from_config("stac.http.timeout_s"), help="seconds before a request is given up")
    p.add_argument("--http-retries", **cli_args.from_config("stac.http.retries"),
                   help="retries of a request answered 429 or 5xx or timed out")
    p.add_argument("--http-retry-delay", **cli_args.from_config("stac.http.retry_delay_s"),
                   help="seconds before the first retry; about doubled before each next")


def _bounds(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected four numbers xmin,ymin,xmax,ymax") from None
    if len(values) != 4 or not all(map(math.isfinite, values)):
        raise argparse.ArgumentTypeError(f"{text!r}: expected four numbers xmin,ymin,xmax,ymax, got {len(values)}")
    if values[0] >= values[2] or values[1] >= values[3]:
        raise argparse.ArgumentTypeError(f"{text!r}: xmin must be below xmax and ymin below ymax")
    return values


def register(command) -> None:
    """Add this stage's commands; ``command(name, help, **kw)`` makes one sub-parser."""
    p = command("search", "STAC search of one tile and year -> items.json manifest")
    p.add_argument("--tile", required=True, help="MGRS tile id, e.g. 31UFT")
    p.add_argument("--year", type=int, required=True, help="calendar year")
    p.add_argument("--catalog", type=path_guard.input_file, help="static STAC catalog.json, a local path or an http(s) URL (or give --api)")
    p.add_argument("--api", help="STAC API root URL (or give --catalog)")
    p.add_argument("--collection", default=default("stac.collection"), help="collection to search")
    p.add_argument("--max-cloud-cover", **cli_args.from_config("stac.max_cloud_cover"), help="skip scenes with more cloud, percent")
    p.add_argument("--out", required=True, type=path_guard.output_file, help="manifest to write (a STAC ItemCollection)")
    p.set_defaults(func=cmd_search)

    p = command("stage", "fetch the scene files a cube reads onto this file system -> a manifest of the local copies")
    p.add_argument("--items", required=True, type=path_guard.input_file, help="manifest written by lcflow search")
    p.add_argument("--tile", required=True, help="MGRS tile id")
    p.add_argument("--year", type=int, required=True, help="calendar year")
    p.add_argument("--bands", default=",".join(default("cube.bands")), help="Sentinel-2 bands the cube reads, comma-separated")
    p.add_argument("--dir", default=default("stage.dir"),
                   help="folder the files go to, under TILE/YEAR/ITEM (on the file system the cube's jobs read)")
    p.add_argument("--connections", **cli_args.from_config("stage.connections"), help="files fetched at a time")
    p.add_argument("--copy-local", action="store_true", help="copy local assets too (else the manifest names them where they are)")
    p.add_argument("--dry-run", action="store_true", help="say how many files and bytes would be stored, and check the "
                                                          "free space, fetching and writing nothing")
    p.add_argument("--bounds", type=_bounds, help="xmin,ymin,xmax,ymax in the tile's CRS: fetch only each file's internal "
                                                 "tiles over this area (default: whole files)")
    _network_options(p)
    p.add_argument("--out", required=True, type=path_guard.output_file, help="manifest of the local copies to write")
    p.set_defaults(func=cmd_stage)

    p = command("cube", "cloud-masked composites on a regular time grid")
    p.add_argument("--items", required=True, type=path_guard.input_file, help="manifest written by lcflow search")
    p.add_argument("--tile", required=True, help="MGRS tile id")
    p.add_argument("--year", type=int, required=True, help="calendar year of the time grid")
    p.add_argument("--bounds", type=_bounds, help="xmin,ymin,xmax,ymax in the tile's CRS (default: the whole tile)")
    CubeSettings.add_options(p)
    _network_options(p)
    p.add_argument("--s3-endpoint", help="S3 endpoint of s3:// assets (default: AWS; Copernicus Data Space's is "
                                         "set for its items)")
    p.add_argument("--unstage", metavar="DIR", help="once the cube is written, remove the manifest's files that lcflow "
                                                    "stage put in DIR (stage.keep: false)")
    p.add_argument("--out", required=True, type=path_guard.output_file, help="cube to write (tiled GeoTIFF)")
    p.add_argument("--valid", required=True, type=path_guard.output_file, help="output: valid-observation count per time step")
    p.set_defaults(func=cmd_cube)

