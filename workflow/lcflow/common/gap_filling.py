"""Linear gap filling in time, compiled (numba): one pass over each series instead of a dozen array-wide
passes with float64 temporaries, which made gap filling the slowest part of mapping a window with a forest.

The arithmetic is that of the array formula it replaced, operation for operation: the difference of the
two observed values in the input's precision, the weight ``(step - before) / (after - before)`` in float64,
``before_value + weight * difference`` in float64, then rounded to float32.
"""

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def fill_linear(x):
    """(samples, steps, bands) with NaN or infinite gaps -> float32, each gap interpolated linearly
    between the observed steps around it, ends taking the nearest observed value; a series with no
    observed step stays NaN."""
    n, t, b = x.shape
    out = np.empty((n, t, b), np.float32)
    for i in range(n):
        for k in range(b):
            before = -1
            for s in range(t):
                value = x[i, s, k]
                if not np.isfinite(value):
                    continue
                out[i, s, k] = value
                if before < 0:
                    for g in range(s):  # the start takes the first observed value
                        out[i, g, k] = value
                else:
                    start = x[i, before, k]
                    difference = value - start
                    for g in range(before + 1, s):
                        weight = (g - before) / (s - before)
                        out[i, g, k] = start + weight * difference
                before = s
            if before < 0:
                for g in range(t):
                    out[i, g, k] = np.nan
            else:
                for g in range(before + 1, t):  # the end takes the last observed value
                    out[i, g, k] = x[i, before, k]
    return out
