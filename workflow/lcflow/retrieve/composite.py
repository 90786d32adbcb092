"""Compositing a window of scenes onto the time grid: the clear-observation mask (SCL classes, cloud halo),
the median of each time step's clear observations, gaps filled in time, and the int16 the cube stores."""

import datetime as dt
import functools

import numpy as np

from lcflow.common import features

#: the cube's no-data value (int16 reflectance x 10000)
NODATA = -32768
#: the scene classification's "no data" class (also what lies outside a scene's swath)
NO_DATA_SCL = 0


def fill_time_gaps(composites: np.ndarray, chunk_px: int = 65536) -> np.ndarray:
    """Steps without a value, interpolated linearly in time between the nearest observed steps (before
    the first and after the last: the nearest one), per pixel and band, in place; a pixel never observed
    stays NaN. composites: (steps, bands, rows, cols), C-contiguous."""
    steps, n_bands, h, w = composites.shape
    flat = composites.reshape(steps, n_bands, h * w)  # a view: filled in place
    for start in range(0, h * w, chunk_px):  # bounded temporaries
        part = flat[:, :, start:start + chunk_px]
        flat[:, :, start:start + chunk_px] = np.moveaxis(features.fill_gaps(np.moveaxis(part, 2, 0)), 0, 2)
    return composites


def to_int16(composites: np.ndarray, chunk: int = 1 << 18) -> np.ndarray:
    """Reflectance x 10000 as stored: rounded, clipped to int16, NaN as :data:`NODATA` (``composites`` is
    used as scratch). A ``chunk`` of values at a time, so that the passes over it stay in the processor's
    cache instead of going through a cube window's 100-odd MB five times."""
    flat = composites.reshape(-1)
    stored = np.empty(flat.shape, dtype=np.int16)
    for start in range(0, flat.size, chunk):
        part, out = flat[start:start + chunk], stored[start:start + chunk]
        nodata = np.isnan(part)
        np.rint(part, out=part)
        np.clip(part, -32767, 32767, out=part)
        with np.errstate(invalid="ignore"):  # NaN has no int16; those cells are set just below
            out[...] = part
        np.copyto(out, NODATA, where=nodata)
    return stored.reshape(composites.shape)


def clear_mask(scl: np.ndarray, invalid: list[int], dilation_px: int) -> np.ndarray:
    """True where an observation (time, rows, cols) is usable: SCL not invalid, clouds and shadows grown
    by ``dilation_px`` (their edges are under-detected). No data (SCL 0, also what lies outside a scene)
    is masked but not grown: a scene's edge or a tile's border loses no clear pixel."""
    bad = _among(scl, invalid)
    if dilation_px > 0:
        bad |= grown(_among(scl, [c for c in invalid if c != NO_DATA_SCL]), dilation_px)
    return ~bad


def grown(mask: np.ndarray, px: int) -> np.ndarray:
    """``mask`` (..., rows, cols) grown by ``px`` pixels, 4-connected, in each image on its own (a
    diamond of radius ``px``), nothing beyond the edges: scipy's ``binary_dilation`` with the cross
    iterated ``px`` times, by shifted ORs of whole arrays (several times faster on a stack of scenes)."""
    out = mask.copy()
    for _ in range(px):
        step = out.copy()
        step[..., 1:, :] |= out[..., :-1, :]
        step[..., :-1, :] |= out[..., 1:, :]
        step[..., :, 1:] |= out[..., :, :-1]
        step[..., :, :-1] |= out[..., :, 1:]
        out = step
    return out


def _among(scl: np.ndarray, classes: list[int]) -> np.ndarray:
    """``np.isin(scl, classes)``; for uint8 classes (as read) a lookup table, several times faster."""
    if scl.dtype != np.uint8:
        return np.isin(scl, classes)
    table = np.zeros(256, dtype=bool)
    table[[c for c in classes if 0 <= c < 256]] = True
    return table[scl]


def composite(values: list[np.ndarray], clear: np.ndarray, times: np.ndarray, edges: list[dt.datetime],
              offsets: np.ndarray | None = None):
    """Median of clear observations per time window.

    values: per band, (obs, rows, cols) digital numbers as read (any numeric dtype); clear (obs, rows, cols);
    offsets: per observation, the DN offset to subtract (processing baseline), or None.
    Returns (steps, bands, rows, cols) float32 with NaN where no clear observation, and counts (steps, rows, cols).
    Only one time step's observations of one band are ever converted to float: the year stays in its
    compact integer type.
    """
    steps = len(edges) - 1
    n_obs, h, w = clear.shape
    out = np.empty((steps, len(values), h, w), dtype=np.float32)  # every step set below
    counts = np.zeros((steps, h, w), dtype=np.uint8)
    edge64 = np.array(edges, dtype="datetime64[us]")
    for k in range(steps):
        sel = np.flatnonzero((times >= edge64[k]) & (times < edge64[k + 1]))
        if not len(sel):
            out[k] = np.nan
            continue
        cloudy = ~clear[sel]
        counts[k] = np.minimum(len(sel) - cloudy.sum(axis=0), 255)
        for b, dn in enumerate(values):
            obs = dn[sel].astype(np.float32)
            if offsets is not None:
                obs -= offsets[sel, None, None]
            obs[cloudy] = np.nan
            out[k, b] = obs[0] if len(sel) == 1 else nan_median(obs)
    return out, counts


def nan_median(values: np.ndarray) -> np.ndarray:
    """Median over axis 0 of the finite values, NaN where there is none: ``np.nanmedian``'s result,
    many times faster on the short axis of a composite (nanmedian goes pixel by pixel there, and even
    ``np.sort`` along it sorts each pixel's few values on its own).

    The observations are ordered by a sorting network (elementwise minimum and maximum of whole planes)
    with NaN as +inf, so a pixel's n finite values come first: its median sits at (n - 1) // 2 and n // 2.
    """
    if len(values) > _NETWORK_MAX:
        ordered = np.sort(values, axis=0)  # NaN sorts last too
    else:
        planes: list[np.ndarray | None] = [np.where(np.isnan(v), np.inf, v) for v in values]
        planes += [None] * (_padded(len(values)) - len(values))  # +inf everywhere: left out
        for i, j in _sorting_network(len(planes)):
            if planes[j] is None:
                continue
            if planes[i] is None:
                planes[i], planes[j] = planes[j], None
                continue
            low = np.minimum(planes[i], planes[j])
            np.maximum(planes[i], planes[j], out=planes[j])
            planes[i] = low
        ordered = np.stack(planes[:len(values)])
    n = np.isfinite(values).sum(axis=0)
    low = np.take_along_axis(ordered, (np.maximum(n, 1) - 1)[None] // 2, axis=0)[0]
    high = np.take_along_axis(ordered, (n // 2)[None], axis=0)[0]
    return np.where(n > 0, (low + high) / 2, np.nan).astype(values.dtype)


#: observations per time step up to which :func:`nan_median` orders them by a sorting network
_NETWORK_MAX = 32


def _padded(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


@functools.cache
def _sorting_network(size: int) -> tuple[tuple[int, int], ...]:
    """Batcher's odd-even merge sort for ``size`` (a power of two) inputs: the pairs (i, j), i < j, to
    compare and exchange in order so that every input ends up sorted."""
    pairs = []
    p = 1
    while p < size:
        k = p
        while k >= 1:
            for j in range(k % p, size - k, 2 * k):
                for i in range(min(k, size - j - k)):
                    if (i + j) // (2 * p) == (i + j + k) // (2 * p):
                        pairs.append((i + j, i + j + k))
            k //= 2
        p *= 2
    return tuple(pairs)
