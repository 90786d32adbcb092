"""MGRS tile ids: validation and the UTM CRS a Sentinel-2 tile is delivered in."""

import re

from .errors import LcflowError

TILE_PATTERN = r"^(0[1-9]|[1-5][0-9]|60)[C-HJ-NP-X][A-HJ-NP-Z][A-HJ-NP-V]$"
_TILE_RE = re.compile(TILE_PATTERN)


def check_tile(tile: str) -> str:
    """Return the tile id unchanged, or raise naming it when it is not an MGRS 100 km square."""
    if not isinstance(tile, str) or not _TILE_RE.match(tile):
        raise LcflowError(f"tile {tile!r} is not an MGRS tile id (e.g. 31UFT; pattern {TILE_PATTERN})")
    return tile


def tile_epsg(tile: str) -> int:
    """EPSG code of the tile's UTM zone: bands N..X are north (326zz), C..M south (327zz)."""
    check_tile(tile)
    zone = int(tile[:2])
    band = tile[2]
    return (32600 if band >= "N" else 32700) + zone
