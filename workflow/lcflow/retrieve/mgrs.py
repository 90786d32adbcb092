"""MGRS tile ids: validation, the UTM CRS a Sentinel-2 tile is delivered in, and the tile's extent."""

import re

from lcflow.errors import LcflowError

TILE_PATTERN = r"^(0[1-9]|[1-5][0-9]|60)[C-HJ-NP-X][A-HJ-NP-Z][A-HJ-NP-V]$"
_TILE_RE = re.compile(TILE_PATTERN)

#: a Sentinel-2 tile is its 100 km MGRS square grown to 109.8 km, eastwards and southwards
S2_TILE_SIZE = 109_800.0


def check_tile(tile: str) -> str:
    """Return the tile id unchanged, or raise naming it when it is not an MGRS 100 km square."""
    if not isinstance(tile, str) or not _TILE_RE.match(tile):
        raise LcflowError(
            f"tile {tile!r} is not an MGRS tile id (e.g. 31UFT; pattern {TILE_PATTERN})"
        )
    return tile


def tile_epsg(tile: str) -> int:
    """EPSG code of the tile's UTM zone: bands N..X are north (326zz), C..M south (327zz)."""
    check_tile(tile)
    zone = int(tile[:2])
    band = tile[2]
    return (32600 if band >= "N" else 32700) + zone


def tile_bounds(tile: str) -> tuple[float, float, float, float]:
    """Nominal extent of the Sentinel-2 tile in its UTM CRS: (xmin, ymin, xmax, ymax).

    The MGRS square's south-west corner comes from GeoTrans (the ``mgrs`` package); the tile starts at
    the square's west edge and top and spans 109.8 km. Real tiles sit within 40 m of this.
    """
    import warnings

    import mgrs as geotrans

    check_tile(tile)
    try:
        with warnings.catch_warnings():
            # GeoTrans warns on squares cut by a band edge
            warnings.simplefilter("ignore", RuntimeWarning)
            _, _, easting, northing = geotrans.MGRS().MGRSToUTM(f"{tile}0000000000")
    except Exception as exc:  # GeoTrans raises its own MGRSError for squares that do not exist
        raise LcflowError(f"tile {tile} is not an MGRS square that exists ({exc})") from exc
    x0, top = float(int(easting)), float(int(northing)) + 100_000.0
    return (x0, top - S2_TILE_SIZE, x0 + S2_TILE_SIZE, top)


def check_inside_tile(tile: str, bounds, tolerance: float = 100.0) -> None:
    """Refuse an area (xmin, ymin, xmax, ymax in the tile's CRS) that is not inside the tile."""
    xmin, ymin, xmax, ymax = tile_bounds(tile)
    bx0, by0, bx1, by1 = bounds
    if (
        bx0 < xmin - tolerance
        or by0 < ymin - tolerance
        or bx1 > xmax + tolerance
        or by1 > ymax + tolerance
    ):
        raise LcflowError(
            f"area {list(bounds)} is not inside tile {tile} (EPSG:{tile_epsg(tile)} "
            f"x {xmin:.0f}..{xmax:.0f}, y {ymin:.0f}..{ymax:.0f})"
        )
