"""lcflow: land-cover maps from Sentinel-2 time series."""

__version__ = "0.1.0"

import os as _os

#: GDAL's raster block cache, MB: bounded, so that a process's memory does not grow with the raster it
#: writes (GDAL's default, 5 % of RAM, is 6 GB on a 128 GB node and fills while a whole-tile map is
#: written); large enough for a window of every band of a cube. GDAL_CACHEMAX in the environment wins.
GDAL_CACHE_MB = 512
_os.environ.setdefault("GDAL_CACHEMAX", str(GDAL_CACHE_MB))
