"""Resampling of a band stored on a coarser (or the same) grid onto the cube's grid of the same CRS:
bilinear for reflectances (20 m, 60 m), nearest for the scene classification.

GDAL's warper does this too, but costs six times a plain read for Sentinel-2's 20 m bands; on grids
that are only scaled and shifted against each other, the same resampling is two passes of numpy.
The result is GDAL's: pixel-centre convention; for bilinear, no data where the source pixel under a
pixel's centre has none, no-data neighbours left out and the weights of the others renormalised,
rounded half up; for nearest, the source pixel under the centre.
"""

import functools
import math

import numpy as np
from affine import Affine


def source_window(src: Affine, dst: Affine, dst_shape: tuple[int, int],
                  method: str = "bilinear") -> tuple[Affine, tuple[int, int]]:
    """Transform and shape of the part of the source pixel grid ``src`` that resampling onto ``dst``
    (its ``dst_shape``) reads: for bilinear the source pixels around every destination pixel centre, for
    nearest those under them (on an aligned grid of the same pixel size: the destination window itself)."""
    h, w = dst_shape
    c0, c1 = _span(dst.c, dst.a, w, src.c, src.a, method)
    r0, r1 = _span(dst.f, dst.e, h, src.f, src.e, method)
    return src * Affine.translation(c0, r0), (r1 - r0 + 1, c1 - c0 + 1)


def _span(dst_origin: float, dst_step: float, n: int, src_origin: float, src_step: float,
          method: str) -> tuple[int, int]:
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


def bilinear(values: np.ndarray, src: Affine, dst: Affine, dst_shape: tuple[int, int], nodata: float = 0) -> np.ndarray:
    """``values`` (..., rows, cols) on the grid ``src`` (as :func:`source_window` gives it), interpolated
    onto ``dst``; integer types are rounded half up, as GDAL does."""
    h, w = dst_shape
    rows = _axis(dst.f, dst.e, h, src.f, src.e, values.shape[-2])
    cols = _axis(dst.c, dst.a, w, src.c, src.a, values.shape[-1])
    is_valid = values != nodata
    if is_valid.all():  # the common window, inside the swath: no weights to renormalise
        out, missing = _interpolate(values.astype(np.float32), rows, cols), None
    else:
        valid = is_valid.astype(np.float32)
        num, den = (_interpolate(a, rows, cols) for a in (np.where(is_valid, values, 0).astype(np.float32), valid))
        with np.errstate(invalid="ignore", divide="ignore"):
            out = num / den
        # GDAL computes a pixel only where the source pixel under its centre is valid
        missing = (valid[..., rows.under[:, None], cols.under] == 0) | (den < 1e-5)
    if np.issubdtype(values.dtype, np.integer):
        out += 0.5
        if missing is None and values.dtype.kind == "u":
            # a mean of unsigned values with weights >= 0: out lies in [0, max + 1), where the cast's
            # truncation is the floor and nothing needs clipping
            return out.astype(values.dtype)
        np.floor(out, out=out)
        info = np.iinfo(values.dtype)
        np.clip(out, info.min, info.max, out=out)
    if missing is not None:
        out[missing] = nodata
    return out.astype(values.dtype)


@functools.lru_cache(maxsize=256)
def _axis(dst_origin: float, dst_step: float, n: int, src_origin: float, src_step: float, size: int) -> "_Axis":
    """An axis shared by every scene of a window: each asset of each date is resampled on the same grids."""
    return _Axis(dst_origin, dst_step, n, src_origin, src_step, size)


class _Axis:
    """Along one axis, for each destination pixel centre: its lower source neighbour (``low``), the
    weight of the upper one (``weight``) and the source pixel it lies in (``under``)."""

    def __init__(self, dst_origin: float, dst_step: float, n: int, src_origin: float, src_step: float, size: int):
        at = (dst_origin + (np.arange(n) + 0.5) * dst_step - src_origin) / src_step  # in source pixels
        pos = at - 0.5  # from the first source pixel's centre
        low = np.floor(pos).astype(np.intp)
        self.low = np.clip(low, 0, size - 2)
        self.weight = np.where(low > size - 2, 1.0, pos - low).astype(np.float32)
        self.under = np.clip(np.floor(at).astype(np.intp), 0, size - 1)
        self.phases = _phases(self.low, self.weight)


#: the longest period of the weights looked for (a 20 m band onto 10 m: 2; onto 7.5 m: 8)
_MAX_PERIOD = 16


def _phases(low: np.ndarray, weight: np.ndarray) -> list[tuple[int, int, int, np.float32]] | None:
    """Where the neighbours and weights repeat every ``k`` destination pixels (grids whose pixel sizes
    are in a small whole ratio, as Sentinel-2's are), per phase ``p < k``: (p, first lower neighbour,
    its step, weight), so that interpolation takes strided slices instead of gathering pixel by pixel;
    None where they do not."""
    n = len(low)
    for k in range(1, min(_MAX_PERIOD, n) + 1):
        step = low[k:] - low[:-k]
        if len(step) and not ((step == step[0]).all() and (weight[k:] == weight[:-k]).all()):
            continue
        m = int(step[0]) if len(step) else 1
        if m < 1:
            return None
        return [(p, int(low[p]), m, weight[p]) for p in range(k)]
    return None


def _interpolate(a: np.ndarray, rows: _Axis, cols: _Axis) -> np.ndarray:
    return _along(_along(a, rows, -2), cols, -1)


def _along(a: np.ndarray, axis: _Axis, dim: int) -> np.ndarray:
    """Linear interpolation of ``a`` along ``dim`` (-2 or -1) onto the destination pixels of ``axis``:
    ``low * (1 - weight) + high * weight`` in float32, by strided slices where the weights repeat
    (the same arithmetic, the same values to the bit), else by gathering."""
    if axis.phases is None:
        lower, upper = np.take(a, axis.low, axis=dim), np.take(a, axis.low + 1, axis=dim)
        w = axis.weight if dim == -1 else axis.weight[:, None]
        return lower * (1 - w) + upper * w
    n = len(axis.low)
    k = len(axis.phases)
    out = np.empty(a.shape[:dim] + (n,) + a.shape[dim:][1:], dtype=np.result_type(a, np.float32))
    for p, start, m, w in axis.phases:
        count = len(range(p, n, k))
        lower = _slice(a, dim, slice(start, start + m * (count - 1) + 1, m))
        upper = _slice(a, dim, slice(start + 1, start + m * (count - 1) + 2, m))
        target = _slice(out, dim, slice(p, None, k))
        np.multiply(lower, 1 - w, out=target)
        target += upper * w
    return out


def _slice(a: np.ndarray, dim: int, part: slice) -> np.ndarray:
    return a[(..., part, slice(None))] if dim == -2 else a[..., part]
