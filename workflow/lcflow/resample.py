"""Bilinear resampling of a coarser band (20 m, 60 m) onto the cube's finer grid of the same CRS.

GDAL's warper does this too, but costs six times a plain read for Sentinel-2's 20 m bands; on grids
that are only scaled and shifted against each other, the same interpolation is two passes of numpy.
The result is GDAL's: pixel-centre convention, no data where the source pixel under a pixel's centre
has none, no-data neighbours left out and the weights of the others renormalised, rounded half up.
"""

import math

import numpy as np
from affine import Affine


def source_window(src: Affine, dst: Affine, dst_shape: tuple[int, int]) -> tuple[Affine, tuple[int, int]]:
    """Transform and shape of the part of the source pixel grid ``src`` that interpolation onto
    ``dst`` (its ``dst_shape``) reads: the source pixels around every destination pixel centre."""
    h, w = dst_shape
    c0, c1 = _span(dst.c, dst.a, w, src.c, src.a)
    r0, r1 = _span(dst.f, dst.e, h, src.f, src.e)
    return src * Affine.translation(c0, r0), (r1 - r0 + 1, c1 - c0 + 1)


def _span(dst_origin: float, dst_step: float, n: int, src_origin: float, src_step: float) -> tuple[int, int]:
    first = (dst_origin + 0.5 * dst_step - src_origin) / src_step - 0.5
    last = (dst_origin + (n - 0.5) * dst_step - src_origin) / src_step - 0.5
    return math.floor(min(first, last)), math.floor(max(first, last)) + 1


def bilinear(values: np.ndarray, src: Affine, dst: Affine, dst_shape: tuple[int, int], nodata: float = 0) -> np.ndarray:
    """``values`` (..., rows, cols) on the grid ``src`` (as :func:`source_window` gives it), interpolated
    onto ``dst``; integer types are rounded half up, as GDAL does."""
    h, w = dst_shape
    rows, row_w = _weights(dst.f, dst.e, h, src.f, src.e, values.shape[-2])
    cols, col_w = _weights(dst.c, dst.a, w, src.c, src.a, values.shape[-1])
    valid = (values != nodata).astype(np.float32)
    data = np.where(valid > 0, values, 0).astype(np.float32)
    num, den = (_interpolate(a, rows, row_w, cols, col_w) for a in (data, valid))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = num / den
    # GDAL computes a pixel only where the source pixel under its centre is valid
    missing = (_nearest(valid, dst.f, dst.e, h, src.f, src.e, dst.c, dst.a, w, src.c, src.a) == 0) | (den < 1e-5)
    if np.issubdtype(values.dtype, np.integer):
        out = np.floor(out + 0.5)
        info = np.iinfo(values.dtype)
        np.clip(out, info.min, info.max, out=out)
    out[missing] = nodata
    return out.astype(values.dtype)


def _weights(dst_origin, dst_step, n, src_origin, src_step, size) -> tuple[np.ndarray, np.ndarray]:
    """Index of the lower neighbour and the weight of the upper one, for each destination pixel."""
    pos = (dst_origin + (np.arange(n) + 0.5) * dst_step - src_origin) / src_step - 0.5
    low = np.floor(pos).astype(np.intp)
    weight = (pos - low).astype(np.float32)
    return np.clip(low, 0, size - 2), np.where(low > size - 2, 1.0, weight).astype(np.float32)


def _nearest(a: np.ndarray, dst_y, dst_dy, h, src_y, src_dy, dst_x, dst_dx, w, src_x, src_dx) -> np.ndarray:
    """``a`` at the source pixel under each destination pixel centre."""
    rows = np.floor((dst_y + (np.arange(h) + 0.5) * dst_dy - src_y) / src_dy).astype(np.intp)
    cols = np.floor((dst_x + (np.arange(w) + 0.5) * dst_dx - src_x) / src_dx).astype(np.intp)
    return a[..., np.clip(rows, 0, a.shape[-2] - 1)[:, None], np.clip(cols, 0, a.shape[-1] - 1)]


def _interpolate(a: np.ndarray, rows, row_w, cols, col_w) -> np.ndarray:
    along_rows = a[..., rows, :] * (1 - row_w)[:, None] + a[..., rows + 1, :] * row_w[:, None]
    return along_rows[..., cols] * (1 - col_w) + along_rows[..., cols + 1] * col_w
