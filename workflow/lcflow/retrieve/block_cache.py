"""Sizing GDAL's block cache for a cube job: a decoded block of every scene's assets stays in it while the
windows inside that block are composited, instead of being decoded again for each."""

from lcflow import GDAL_CACHE_MB


def block_cache_bytes(scene_block_bytes: int, scenes: int, window_bytes: int) -> int:
    """GDAL's block cache a cube job wants: a decoded block of every asset of every scene twice over (a
    window off the blocks' grid spans two or more), plus the window of the cube being written."""
    return 2 * scene_block_bytes * scenes + window_bytes


def window_bytes(block: int, steps: int, layers: int) -> int:
    """A cube window in memory while it is written: int16 composites and uint8 valid counts."""
    return block * block * steps * (2 * layers + 1)


def block_cache_size(need: int, cache_mb: int) -> int:
    """The block cache a cube job takes: what it needs, at most ``cache_mb``, never less than the process's."""
    return max(min(need, cache_mb * 2**20), gdal_cache_bytes())


def gdal_cache_bytes() -> int:
    """The size of GDAL's block cache in this process, bytes."""
    from rasterio.env import get_gdal_config

    value = get_gdal_config("GDAL_CACHEMAX")
    return value if isinstance(value, int) and value > 0 else GDAL_CACHE_MB * 2**20
