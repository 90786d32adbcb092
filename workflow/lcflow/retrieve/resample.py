"""Resampling of a band stored on a coarser (or the same) grid onto the cube's grid of the same CRS:
bilinear for reflectances (20 m, 60 m), nearest for the scene classification.

GDAL's warper does this too, but costs six times a plain read for Sentinel-2's 20 m bands; on grids
that are only scaled and shifted against each other, the same resampling is one compiled pass over
the rows and one over the columns.
The result is GDAL's: pixel-centre convention; for bilinear, no data where the source pixel under a
pixel's centre has none, no-data neighbours left out and the weights of the others renormalised,
rounded half up; for nearest, the source pixel under the centre.
"""

import functools
import math

import numba
import numpy as np
from affine import Affine


def source_window(
    src: Affine, dst: Affine, dst_shape: tuple[int, int], method: str = "bilinear"
) -> tuple[Affine, tuple[int, int]]:
    """Transform and shape of the part of the source pixel grid ``src`` that resampling onto ``dst``
    (its ``dst_shape``) reads: for bilinear the source pixels around every destination pixel centre, for
    nearest those under them (on an aligned grid of the same pixel size: the destination window itself)."""
    h, w = dst_shape
    c0, c1 = _span(dst.c, dst.a, w, src.c, src.a, method)
    r0, r1 = _span(dst.f, dst.e, h, src.f, src.e, method)
    return src * Affine.translation(c0, r0), (r1 - r0 + 1, c1 - c0 + 1)


def _span(
    dst_origin: float, dst_step: float, n: int, src_origin: float, src_step: float, method: str
) -> tuple[int, int]:
    first = (dst_origin + 0.5 * dst_step - src_origin) / src_step
    last = (dst_origin + (n - 0.5) * dst_step - src_origin) / src_step
    if method == "nearest":
        return math.floor(min(first, last)), math.floor(max(first, last))
    if method != "bilinear":
        raise ValueError(f"resampling method {method!r}: bilinear or nearest")
    return math.floor(min(first, last) - 0.5), math.floor(max(first, last) - 0.5) + 1


def nearest(values: np.ndarray, src: Affine, dst: Affine, dst_shape: tuple[int, int]) -> np.ndarray:
    """``values`` (..., rows, cols) on the grid ``src`` (as :func:`source_window` gives it for nearest):
    for each pixel of ``dst``, the source pixel its centre lies in (``values`` itself where the grids
    are the same)."""
    if src.almost_equals(dst) and values.shape[-2:] == tuple(dst_shape):
        return values
    h, w = dst_shape
    rows = _axis(dst.f, dst.e, h, src.f, src.e, values.shape[-2])
    cols = _axis(dst.c, dst.a, w, src.c, src.a, values.shape[-1])
    return values[..., rows.under[:, None], cols.under]


def bilinear(
    values: np.ndarray, src: Affine, dst: Affine, dst_shape: tuple[int, int], nodata: float = 0
) -> np.ndarray:
    """``values`` on the grid ``src``, interpolated onto ``dst``; integer types are rounded half up, as
    GDAL does.

    Args:
        values: (..., rows, cols) on ``src``.
        src: the transform of ``values`` (as :func:`source_window` gives it).
        dst: the target grid's transform.
        dst_shape: the target's rows and columns.
        nodata: the value that is no data in ``values``, left out of the interpolation.
    """
    h, w = dst_shape
    rows = _axis(dst.f, dst.e, h, src.f, src.e, values.shape[-2])
    cols = _axis(dst.c, dst.a, w, src.c, src.a, values.shape[-1])
    flat = values.reshape(-1, *values.shape[-2:])
    out = np.empty((len(flat), h, w), dtype=values.dtype)
    integer = np.issubdtype(values.dtype, np.integer)
    lowest, highest = (
        (np.iinfo(values.dtype).min, np.iinfo(values.dtype).max) if integer else (0, 0)
    )
    _bilinear_kernel(
        flat,
        values.dtype.type(nodata),
        rows.low,
        rows.weight,
        rows.under,
        cols.low,
        cols.weight,
        cols.under,
        integer,
        np.float32(lowest),
        np.float32(highest),
        out,
    )
    return out.reshape(*values.shape[:-2], h, w)


def compiled() -> None:
    """Compile (or load from numba's cache) the bilinear kernel for Sentinel-2's uint16 DNs now: its first
    call otherwise takes seconds inside whatever calls it first."""
    bilinear(np.zeros((2, 2), np.uint16), Affine.identity(), Affine.identity(), (1, 1))


@functools.lru_cache(maxsize=256)
def _axis(
    dst_origin: float, dst_step: float, n: int, src_origin: float, src_step: float, size: int
) -> "_Axis":
    """An axis shared by every scene of a window: each asset of each date is resampled on the same grids."""
    return _Axis(dst_origin, dst_step, n, src_origin, src_step, size)


class _Axis:
    """Along one axis, for each destination pixel centre: its lower source neighbour (``low``), the
    weight of the upper one (``weight``) and the source pixel it lies in (``under``)."""

    def __init__(
        self,
        dst_origin: float,
        dst_step: float,
        n: int,
        src_origin: float,
        src_step: float,
        size: int,
    ):
        at = (
            dst_origin + (np.arange(n) + 0.5) * dst_step - src_origin
        ) / src_step  # in source pixels
        pos = at - 0.5  # from the first source pixel's centre
        low = np.floor(pos).astype(np.intp)
        self.low = np.clip(low, 0, size - 2)
        self.weight = np.where(low > size - 2, 1.0, pos - low).astype(np.float32)
        self.under = np.clip(np.floor(at).astype(np.intp), 0, size - 1)


@numba.njit(nogil=True, cache=True)
def _bilinear_kernel(
    a,
    nodata,
    row_low,
    row_weight,
    row_under,
    col_low,
    col_weight,
    col_under,
    integer,
    lowest,
    highest,
    out,
):
    """Each image of ``a`` interpolated into ``out``, a row at a time: ``low * (1 - weight) + high * weight``
    in float32 along the rows, then along the columns, with the arithmetic of the array expressions to the
    bit. Where an image holds ``nodata``, the interpolated validity (0 or 1) divides the interpolated
    values taken as 0 there, and a pixel whose source pixel under its centre is no data stays no data;
    integers are rounded half up (the floor of value + 0.5) and clipped to their type."""
    one, half, tiny = np.float32(1), np.float32(0.5), np.float32(1e-5)
    values = np.empty(a.shape[2], np.float32)
    weights = np.empty(a.shape[2], np.float32)
    for i in range(a.shape[0]):
        holed = False
        for r in range(a.shape[1]):
            for c in range(a.shape[2]):
                holed |= a[i, r, c] == nodata
        for r in range(out.shape[1]):
            low, w = row_low[r], row_weight[r]
            for c in range(a.shape[2]):
                upper, lower = a[i, low + 1, c], a[i, low, c]
                if holed:
                    values[c] = (
                        np.float32(lower if lower != nodata else 0) * (one - w)
                        + np.float32(upper if upper != nodata else 0) * w
                    )
                    weights[c] = (
                        np.float32(lower != nodata) * (one - w) + np.float32(upper != nodata) * w
                    )
                else:
                    values[c] = np.float32(lower) * (one - w) + np.float32(upper) * w
            for c in range(out.shape[2]):
                low_c, w_c = col_low[c], col_weight[c]
                value = values[low_c] * (one - w_c) + values[low_c + 1] * w_c
                if holed:
                    weight = weights[low_c] * (one - w_c) + weights[low_c + 1] * w_c
                    if a[i, row_under[r], col_under[c]] == nodata or weight < tiny:
                        out[i, r, c] = nodata
                        continue
                    value = value / weight
                if integer:
                    value = min(max(np.floor(value + half), lowest), highest)
                out[i, r, c] = value
