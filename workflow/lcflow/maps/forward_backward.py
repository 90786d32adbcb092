"""The forward-backward pass of the consistent maps' hidden Markov model (:mod:`lcflow.maps.hmm`),
compiled: scaled, several pixels side by side, its sums in numpy's order so that its results equal a numpy
implementation's to the bit."""

from typing import Any

import numba
import numpy as np

#: pixels the forward-backward takes side by side: its loops run over them innermost, so the compiler
#: does each step for several pixels in one vector instruction (divisions included: ``error_model``
#: "numpy" drops the zero check that kept them scalar; the sums divided by are never zero)
LANES = 64
_VECTOR: dict[str, Any] = dict(cache=True, nogil=True, error_model="numpy")


@numba.njit(**_VECTOR)
def _pairwise_columns(a, m, out):  # pragma: no cover - compiled
    """``out[q]`` = the sum of ``a[:, q]`` for q < m, in numpy's order (pairwise, eight accumulators),
    so that every sum equals numpy's ``sum`` over the classes to the bit."""
    n = a.shape[0]
    if n < 8:
        for q in range(m):
            out[q] = 0.0
        for i in range(n):
            row = a[i]
            for q in range(m):
                out[q] += row[q]
        return
    if n > 128:  # numpy halves the run at a multiple of eight
        half = n // 2
        half -= half % 8
        rest = np.empty(out.shape[0])
        _pairwise_columns(a[:half], m, out)
        _pairwise_columns(a[half:], m, rest)
        for q in range(m):
            out[q] += rest[q]
        return
    r = np.empty((8, a.shape[1]))
    for c in range(8):
        for q in range(m):
            r[c, q] = a[c, q]
    i = 8
    while i < n - (n % 8):
        for c in range(8):
            row, acc = a[i + c], r[c]
            for q in range(m):
                acc[q] += row[q]
        i += 8
    for q in range(m):
        out[q] = ((r[0, q] + r[1, q]) + (r[2, q] + r[3, q])) + (
            (r[4, q] + r[5, q]) + (r[6, q] + r[7, q])
        )
    while i < n:
        row = a[i]
        for q in range(m):
            out[q] += row[q]
        i += 1


@numba.njit(**_VECTOR)
def _divide(a, s, out, m):  # pragma: no cover - compiled
    for q in range(m):
        out[q] = a[q] / s[q]


@numba.njit(**_VECTOR)
def _step(v, total, keep, move, gain, out, m):  # pragma: no cover - compiled
    """One transition of ``v`` (a class's row): ``move * sum + gain * v``, or ``v`` where refused."""
    for q in range(m):
        moved = move * total[q] + gain * v[q]
        out[q] = v[q] if keep[q] else moved


@numba.njit(**_VECTOR)
# pragma: no cover
def forward_backward(codes, empty, levels, k, move, gain, frozen, has_frozen, path, along):
    """Scaled forward-backward, ``LANES`` pixels side by side: a step moves ``v`` to ``move * sum(v) +
    gain * v`` (the transition matrix is symmetric: the same step serves both directions), or keeps it
    where refused. ``along``: only the marginal of ``path``'s class is kept."""
    t_n, p_n, n = codes.shape
    post = np.empty((t_n, p_n, 1 if along else n))
    e = np.empty((t_n, n, LANES))  # the evidence of LANES pixels
    alpha = np.empty((t_n, n, LANES))
    beta = np.empty((t_n, n, LANES))
    a = np.empty((n, LANES))
    # apart from a: a step in place would keep the compiler's loops scalar
    moved = np.empty((n, LANES))
    s = np.empty(LANES)
    total = np.empty(LANES)
    keep = np.zeros(LANES, dtype=np.bool_)
    for p0 in range(0, p_n, LANES):
        m = min(LANES, p_n - p0)
        for t in range(t_n):
            for q in range(m):
                no = empty[t, p0 + q]
                for j in range(n):
                    e[t, j, q] = 1.0 if no else levels[codes[t, p0 + q, j]]
        for j in range(n):
            row, first = a[j], e[0, j]
            for q in range(m):
                row[q] = first[q] / k
        _pairwise_columns(a, m, s)
        for j in range(n):
            _divide(a[j], s, alpha[0, j], m)
        for t in range(1, t_n):
            _pairwise_columns(alpha[t - 1], m, total)
            for q in range(m):
                keep[q] = has_frozen and frozen[t - 1, p0 + q]
            for j in range(n):
                _step(alpha[t - 1, j], total, keep, move[t], gain[t], a[j], m)
                row, et = a[j], e[t, j]
                for q in range(m):
                    row[q] *= et[q]
            _pairwise_columns(a, m, s)
            for j in range(n):
                _divide(a[j], s, alpha[t, j], m)
        beta[t_n - 1] = 1.0
        for t in range(t_n - 2, -1, -1):
            for j in range(n):
                row, b, et = a[j], beta[t + 1, j], e[t + 1, j]
                for q in range(m):
                    row[q] = b[q] * et[q]
            _pairwise_columns(a, m, total)
            for q in range(m):
                keep[q] = has_frozen and frozen[t, p0 + q]
            for j in range(n):
                _step(a[j], total, keep, move[t + 1], gain[t + 1], moved[j], m)
            _pairwise_columns(moved, m, s)
            for j in range(n):
                _divide(moved[j], s, beta[t, j], m)
        for t in range(t_n):
            for j in range(n):
                row, f, b = a[j], alpha[t, j], beta[t, j]
                for q in range(m):
                    row[q] = f[q] * b[q]
            _pairwise_columns(a, m, s)
            if along:
                for q in range(m):
                    post[t, p0 + q, 0] = a[path[t, p0 + q], q] / s[q]
            else:
                for j in range(n):
                    for q in range(m):
                        post[t, p0 + q, j] = a[j, q] / s[q]
    return post
