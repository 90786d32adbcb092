"""Compositing a window of scenes onto the time grid: the clear-observation mask (SCL classes, cloud halo),
the median of each time step's clear observations, gaps filled in time, and the int16 the cube stores."""

import functools
from dataclasses import dataclass

import numba
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
        part = flat[:, :, start : start + chunk_px]
        flat[:, :, start : start + chunk_px] = np.moveaxis(
            features.fill_gaps(np.moveaxis(part, 2, 0)), 0, 2
        )
    return composites


def to_int16(composites: np.ndarray, chunk: int = 1 << 18) -> np.ndarray:
    """Reflectance x 10000 as stored: rounded, clipped to int16, NaN as :data:`NODATA` (``composites`` is
    used as scratch). A ``chunk`` of values at a time, so that the passes over it stay in the processor's
    cache instead of going through a cube window's 100-odd MB five times."""
    flat = composites.reshape(-1)
    stored = np.empty(flat.shape, dtype=np.int16)
    for start in range(0, flat.size, chunk):
        part, out = flat[start : start + chunk], stored[start : start + chunk]
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


def clear_where(
    mask: np.ndarray, clear: list[int], nodata: np.ndarray, dilation_px: int
) -> np.ndarray:
    """True where an observation (time, rows, cols) is usable by a product's own mask: its value is one of
    ``clear``; the other values grown by ``dilation_px``, except each observation's ``nodata`` value (what
    lies outside a scene), masked but not grown."""
    good = np.isin(mask, clear)
    if dilation_px > 0:
        outside = np.zeros(mask.shape, dtype=bool)
        for k, value in enumerate(nodata):
            if not np.isnan(value):
                outside[k] = mask[k] == value
        good &= ~grown(~good & ~outside, dilation_px)
    return good


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


#: a clear value below this (reflectance x 10000: -0.05) is far below 0: an offset taken off pixels that had none
FAR_BELOW_ZERO = -500.0


@dataclass(frozen=True)
class BandReading:
    """How a band's digital numbers of each observation become reflectance x 10000: ``dn * gain + bias``
    (float32), and the value that is no data in them (NaN: none; a NaN value is never data)."""

    gain: np.ndarray  # (obs,) float32
    bias: np.ndarray  # (obs,) float32
    nodata: np.ndarray  # (obs,) float64

    @classmethod
    def plain(cls, n_obs: int, nodata: float = np.nan) -> "BandReading":
        """DNs that are reflectance x 10000 as they are."""
        return cls(
            np.ones(n_obs, np.float32),
            np.zeros(n_obs, np.float32),
            np.full(n_obs, nodata, np.float64),
        )


def composite(
    values: list[np.ndarray],
    clear: np.ndarray,
    step_of: np.ndarray,
    steps: int,
    readings: list[BandReading] | None = None,
    stored: bool = False,
    low: np.ndarray | None = None,
):
    """Median of clear observations per time step, each band's own no-data values left out.

    Returns (steps, bands, rows, cols) float32 with NaN where no clear observation (``stored``: int16 as
    :func:`to_int16` stores them, without a float32 copy of the window), and counts (steps, rows, cols) of
    the clear observations. Compiled, a pixel at a time: a pixel's observations of a step are converted to
    float32 (``dn * gain + bias``) and ordered in a small buffer, so the year stays in its compact type and
    no array-wide temporary is made. The median is ``np.nanmedian``'s, in float32: the mean of the two
    middle values.

    Args:
        values: per band, (obs, rows, cols) digital numbers as read (any numeric dtype).
        clear: (obs, rows, cols), True where an observation is clear (its mask, and data in some band).
        step_of: (obs,) the time step of each observation, -1 for none (:mod:`lcflow.retrieve.time_grid`).
        steps: how many steps the grid has.
        readings: per band, each observation's gain, bias and no-data value; None: DNs as they are.
        stored: return the composites as int16, as the cube stores them.
        low: (obs, 2) int64, added to: each observation's clear values and those of them
            :data:`FAR_BELOW_ZERO` (an offset taken where there was none).
    """
    n_obs, h, w = clear.shape
    step_of = np.asarray(step_of, dtype=np.intp)
    members = [np.flatnonzero(step_of == k) for k in range(steps)]
    starts = np.cumsum([0] + [len(m) for m in members]).astype(np.intp)
    order = np.concatenate(members).astype(np.intp) if n_obs else np.zeros(0, np.intp)
    # each step's comparators: a network for its padded size, less those that reach the padding
    networks = [
        [(i, j) for i, j in _sorting_network(_padded(len(m))) if j < len(m)] for m in members
    ]
    pair_starts = np.cumsum([0] + [len(n) for n in networks]).astype(np.intp)
    pairs = np.array([p for n in networks for p in n], dtype=np.intp).reshape(-1, 2)
    readings = readings or [BandReading.plain(n_obs) for _ in values]
    tally = np.zeros((n_obs, 2), np.int64) if low is None else low
    out = np.empty((steps, len(values), h, w), dtype=np.int16 if stored else np.float32)
    counts = np.empty((steps, h, w), dtype=np.uint8)
    _clear_counts(clear, order, starts, counts)
    for b, dn in enumerate(values):
        r = readings[b]
        _median_composites(
            dn,
            clear,
            order,
            starts,
            pairs,
            pair_starts,
            r.gain,
            r.bias,
            r.nodata,
            out[:, b],
            stored,
            tally,
        )
    return out, counts


@numba.njit(nogil=True, cache=True)
def _clear_counts(clear, order, starts, counts):
    """counts[k]: how many of step ``k``'s observations (``order[starts[k]:starts[k + 1]]``) are clear,
    at most 255."""
    _, h, w = clear.shape
    for k in range(len(starts) - 1):
        for r in range(h):
            for c in range(w):
                n = 0
                for j in range(starts[k], starts[k + 1]):
                    n += clear[order[j], r, c]
                counts[k, r, c] = min(n, 255)


@numba.njit(nogil=True, cache=True)
def _median_composites(
    dn, clear, order, starts, pairs, pair_starts, gain, bias, nodata, out, stored, tally
):
    """out[k] (rows, cols): the median of step ``k``'s clear observations of one band, NaN where none.
    A row at a time: the step's observations of the row, +inf where not clear or no data, are ordered by
    the step's comparators (``pairs[pair_starts[k]:pair_starts[k + 1]]``: minimum and maximum across
    whole rows, without a branch), so a pixel's n clear values come first: its median is the mean of those
    at (n - 1) // 2 and n // 2. ``stored``: into int16 ``out`` as :func:`to_int16` rounds and clips.
    ``tally[i]``: observation i's clear values, and those far below 0, counted."""
    _, h, w = clear.shape
    longest = 1
    for k in range(len(starts) - 1):
        longest = max(longest, starts[k + 1] - starts[k])
    ordered = np.empty((longest, w), np.float32)
    taken = np.empty(w, np.intp)
    inf, two = np.float32(np.inf), np.float32(2)
    lowest, highest = np.float32(-32767), np.float32(32767)
    far = np.float32(FAR_BELOW_ZERO)
    for k in range(len(starts) - 1):
        first, m = starts[k], starts[k + 1] - starts[k]
        for r in range(h):
            taken[:] = 0
            for j in range(m):
                i = order[first + j]
                g, o, nd = gain[i], bias[i], nodata[i]
                seen, below = 0, 0
                for c in range(w):
                    x = dn[i, r, c]
                    is_clear = clear[i, r, c] and x == x and x != nd
                    v = np.float32(x) * g + o
                    ordered[j, c] = v if is_clear else inf
                    taken[c] += is_clear
                    seen += is_clear
                    below += is_clear and v < far
                tally[i, 0] += seen
                tally[i, 1] += below
            for p in range(pair_starts[k], pair_starts[k + 1]):
                low, high = pairs[p, 0], pairs[p, 1]
                for c in range(w):
                    x, y = ordered[low, c], ordered[high, c]
                    ordered[low, c] = x if x < y else y
                    ordered[high, c] = y if x < y else x
            for c in range(w):
                n = taken[c]
                middle = (ordered[max(n - 1, 0) // 2, c] + ordered[n // 2, c]) / two
                if stored:
                    out[k, r, c] = min(max(np.rint(middle), lowest), highest) if n > 0 else NODATA
                else:
                    out[k, r, c] = middle if n > 0 else np.nan


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
