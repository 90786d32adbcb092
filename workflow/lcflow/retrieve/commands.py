"""``lcflow search`` and ``lcflow cube``: the scenes of a tile-year, and their composites on a time grid."""

import argparse
import logging
import math

from lcflow.common import cli_args, path_guard
from lcflow.defaults import default
from lcflow.retrieve.cube_settings import CubeSettings
from lcflow.retrieve.remote import SIGNING_CHOICES
from lcflow.retrieve.stage_settings import StageSettings

log = logging.getLogger("lcflow")


def cmd_search(a):
    from lcflow.retrieve import search

    n = search.run(
        a.tile,
        a.year,
        a.out,
        catalog=a.catalog,
        api=a.api,
        collection=a.collection,
        max_cloud_cover=a.max_cloud_cover,
    )
    log.info("%s %s: %d items -> %s", a.tile, a.year, n, a.out)


def cmd_cube(a):
    from lcflow.retrieve import cube

    grid = cube.run(
        a.items,
        a.tile,
        a.year,
        a.out,
        a.valid,
        CubeSettings.from_options(a),
        bounds=a.bounds,
        network=_network(a),
    )
    log.info(
        "%s %s: cube %d x %d px (%s) -> %s",
        a.tile,
        a.year,
        grid.width,
        grid.height,
        grid.crs,
        a.out,
    )
    if a.unstage:
        from lcflow.retrieve import stage_in

        stage_in.remove_staged(a.items, a.unstage)


def cmd_stage(a):
    from lcflow.retrieve import sentinel2, stage_in

    section = dict(a.cube_settings or {})
    if a.bands:
        section["bands"] = sentinel2.check_bands(a.bands.split(","))
    cube, settings, network = (
        CubeSettings.from_config(section),
        StageSettings.from_options(a),
        _network(a),
    )
    if a.dry_run:
        stage_in.dry_run(a.items, a.tile, a.year, cube, settings, network=network, bounds=a.bounds)
        return
    n = stage_in.run(
        a.items, a.tile, a.year, cube, a.out, settings, network=network, bounds=a.bounds
    )
    log.info("%s %s: %d files staged -> %s", a.tile, a.year, n, a.out)


def _network(a):
    """How a command's remote reads go (``_network_options``)."""
    from lcflow.retrieve import remote

    return remote.Network(
        timeout_s=a.http_timeout,
        retries=a.http_retries,
        retry_delay_s=a.http_retry_delay,
        s3_endpoint=getattr(a, "s3_endpoint", None),
        signing=a.signing,
    )


def _network_options(p) -> None:
    """The options of a command that reads remote scenes: signing, timeouts and retries."""
    p.add_argument(
        "--signing",
        choices=SIGNING_CHOICES,
        default=default("stac.signing"),
        help="sign asset URLs before reading (auto: Planetary Computer items are signed)",
    )
    p.add_argument(
        "--http-timeout",
        **cli_args.from_config("stac.http.timeout_s"),
        help="seconds before a request is given up",
    )
    p.add_argument(
        "--http-retries",
        **cli_args.from_config("stac.http.retries"),
        help="retries of a request answered 429 or 5xx or timed out",
    )
    p.add_argument(
        "--http-retry-delay",
        **cli_args.from_config("stac.http.retry_delay_s"),
        help="seconds before the first retry; about doubled before each next",
    )


def _bounds(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected four numbers xmin,ymin,xmax,ymax"
        ) from None
    if len(values) != 4 or not all(map(math.isfinite, values)):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected four numbers xmin,ymin,xmax,ymax, got {len(values)}"
        )
    if values[0] >= values[2] or values[1] >= values[3]:
        raise argparse.ArgumentTypeError(f"{text!r}: xmin must be below xmax and ymin below ymax")
    return values


def register(command) -> None:
    """Add this stage's commands; ``command(name, help, **kw)`` makes one sub-parser."""
    _search_command(command)
    _stage_command(command)
    _cube_command(command)


def _search_command(command) -> None:
    """``lcflow search``."""
    p = command("search", "STAC search of one tile and year -> items.json manifest")
    p.add_argument("--tile", required=True, help="MGRS tile id, e.g. 31UFT")
    p.add_argument("--year", type=int, required=True, help="calendar year")
    p.add_argument(
        "--catalog",
        type=path_guard.input_file,
        help="static STAC catalog.json, a local path or an http(s) URL (or give --api)",
    )
    p.add_argument("--api", help="STAC API root URL (or give --catalog)")
    p.add_argument("--collection", default=default("stac.collection"), help="collection to search")
    p.add_argument(
        "--max-cloud-cover",
        **cli_args.from_config("stac.max_cloud_cover"),
        help="skip scenes with more cloud, percent",
    )
    p.add_argument(
        "--out",
        required=True,
        type=path_guard.output_file,
        help="manifest to write (a STAC ItemCollection)",
    )
    p.set_defaults(func=cmd_search)


def _stage_command(command) -> None:
    """``lcflow stage``."""
    p = command(
        "stage",
        "fetch the scene files a cube reads onto this file system -> a manifest of the local copies",
    )
    p.add_argument(
        "--items",
        required=True,
        type=path_guard.input_file,
        help="manifest written by lcflow search",
    )
    p.add_argument("--tile", required=True, help="MGRS tile id")
    p.add_argument("--year", type=int, required=True, help="calendar year")
    p.add_argument(
        "--cube-settings",
        type=cli_args.json_object,
        metavar="JSON",
        help="the config's cube section as a JSON object: its bands, mask and multi-band assets say "
        "what of each item is fetched (default: the schema's)",
    )
    p.add_argument(
        "--bands",
        help="Sentinel-2 bands the cube reads, comma-separated (over --cube-settings' bands; default: "
        + ",".join(default("cube.bands"))
        + ")",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="say how many files and bytes would be stored, and check the "
        "free space, fetching and writing nothing",
    )
    p.add_argument(
        "--bounds",
        type=_bounds,
        help="xmin,ymin,xmax,ymax in the tile's CRS: fetch only each file's internal "
        "tiles over this area (default: whole files)",
    )
    _network_options(p)
    p.add_argument(
        "--out",
        required=True,
        type=path_guard.output_file,
        help="manifest of the local copies to write",
    )
    StageSettings.add_options(p)
    p.set_defaults(func=cmd_stage)


def _cube_command(command) -> None:
    """``lcflow cube``."""
    p = command("cube", "cloud-masked composites on a regular time grid")
    p.add_argument(
        "--items",
        required=True,
        type=path_guard.input_file,
        help="manifest written by lcflow search",
    )
    p.add_argument("--tile", required=True, help="MGRS tile id")
    p.add_argument("--year", type=int, required=True, help="calendar year of the time grid")
    p.add_argument(
        "--bounds",
        type=_bounds,
        help="xmin,ymin,xmax,ymax in the tile's CRS (default: the whole tile)",
    )
    CubeSettings.add_options(p)
    _network_options(p)
    p.add_argument(
        "--s3-endpoint",
        help="S3 endpoint of s3:// assets (default: AWS; Copernicus Data Space's is "
        "set for its items)",
    )
    p.add_argument(
        "--unstage",
        metavar="DIR",
        help="once the cube is written, remove the manifest's files that lcflow "
        "stage put in DIR (stage.keep: false)",
    )
    p.add_argument(
        "--out", required=True, type=path_guard.output_file, help="cube to write (tiled GeoTIFF)"
    )
    p.add_argument(
        "--valid",
        required=True,
        type=path_guard.output_file,
        help="output: valid-observation count per time step",
    )
    p.set_defaults(func=cmd_cube)
