"""Where pixels are on the Earth: latitude and longitude (WGS 84) of map coordinates and of a window's
pixel centres, for models that take a location as input."""

import numpy as np
from rasterio.crs import CRS
from rasterio.transform import Affine
from rasterio.warp import transform as warp_transform
from rasterio.windows import Window


def to_latlon(x: np.ndarray, y: np.ndarray, crs: str | CRS) -> np.ndarray:
    """(n, 2) latitude, longitude in degrees of points ``x``, ``y`` in ``crs``."""
    if len(x) == 0:
        return np.zeros((0, 2), dtype=np.float32)
    lon, lat = warp_transform(
        CRS.from_user_input(crs), CRS.from_epsg(4326), np.asarray(x, float), np.asarray(y, float)
    )
    return np.stack([lat, lon], axis=1).astype(np.float32)


def window_latlon(transform: Affine, crs: str | CRS, window: Window) -> np.ndarray:
    """(rows * cols, 2) latitude, longitude of the centres of ``window``'s pixels, row-major."""
    rows, cols = np.meshgrid(
        np.arange(int(window.height)) + int(window.row_off) + 0.5,
        np.arange(int(window.width)) + int(window.col_off) + 0.5,
        indexing="ij",
    )
    x, y = transform * (cols.ravel(), rows.ravel())
    return to_latlon(np.asarray(x), np.asarray(y), crs)
