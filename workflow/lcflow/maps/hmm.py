"""Consistent annual maps: each pixel's most likely class sequence across the years.

Per-year maps change class wherever one year's classifier errs, so the change between two independent
maps is mostly noise (the per-year errors add up). A hidden Markov model over the years, as in
Abercrombie & Friedl (2016, IEEE TGRS 54(2)), takes each year's class probabilities as the evidence
and a prior that land cover rarely changes (``change``: the probability that a pixel's class changes
from one year to the next). The Viterbi path keeps a pixel's class unless the evidence for a change,
in the years on both sides of it, outweighs that prior; forward-backward gives each year's class the
probability that it is right given all years, which becomes the consistent map's confidence.

The transition matrix is ``(1 - change)`` on the diagonal and ``change / (K - 1)`` elsewhere; years
further apart use its power (``n`` years: still one stay and one move probability, computed in
closed form), so a gap in the series allows proportionally more change.
"""

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from lcflow.errors import LcflowError

#: probabilities below this are raised to it: a classifier's "impossible" is not evidence to trust,
#: and it keeps one confident year from vetoing every other year's evidence
PROBABILITY_FLOOR = 1e-3


@dataclass(frozen=True)
class ChangePrior:
    """The prior on change: ``change`` is the probability that a pixel changes class in one year."""

    change: float
    n_classes: int

    def __post_init__(self) -> None:
        if not 0 < self.change < 1 - 1 / self.n_classes:
            raise LcflowError(f"consistency change probability {self.change} must lie between 0 and "
                              f"{1 - 1 / self.n_classes:.3f} (1 - 1/classes; more means change is likelier than not)")

    def stay_move(self, years_apart: int) -> tuple[float, float]:
        """Probabilities of keeping the class and of moving to one given other class over ``years_apart``.

        The matrix ``s I + m (J - I)`` has eigenvalues 1 and ``s - m``; its n-th power is
        ``lam^n I + (1 - lam^n) / K J``.
        """
        if years_apart < 1:
            raise LcflowError(f"years must increase (got a step of {years_apart} years)")
        k = self.n_classes
        stay, move = 1 - self.change, self.change / (k - 1)
        lam = (stay - move) ** years_apart
        return lam + (1 - lam) / k, (1 - lam) / k


def _evidence(proba: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """(years, pixels, classes) probabilities -> log evidence; a year without data says nothing."""
    log_e = np.log(np.maximum(proba, PROBABILITY_FLOOR, dtype=np.float64))
    log_e[empty] = 0.0
    return log_e


def viterbi(proba: np.ndarray, empty: np.ndarray, years: list[int], prior: ChangePrior,
            frozen: np.ndarray | None = None) -> np.ndarray:
    """The most likely class index of every pixel in every year: (years, pixels) from (years, pixels, classes).

    ``frozen`` (years - 1, pixels) forbids a change between year t and t + 1 where it is set.
    O(years x pixels x classes): with one stay and one move probability, the best predecessor of class
    j is either j itself or the best of the others (the best overall, or the second best where j is it).
    """
    return _viterbi(_evidence(proba, empty), years, prior, frozen)


def _viterbi(log_e: np.ndarray, years: list[int], prior: ChangePrior, frozen: np.ndarray | None) -> np.ndarray:
    """:func:`viterbi` from the log evidence (years, pixels, classes)."""
    t_n, p_n, k = log_e.shape
    score = log_e[0] - np.log(k)
    back = np.empty((t_n, p_n, k), dtype=np.int16 if k < 32768 else np.int32)
    pixels = np.arange(p_n)
    for t in range(1, t_n):
        stay, move = (np.log(v) for v in prior.stay_move(years[t] - years[t - 1]))
        order = np.argpartition(-score, 1, axis=1)[:, :2] if k > 1 else np.zeros((p_n, 2), int)
        first, second = order[:, 0], order[:, 1]
        swap = score[pixels, second] > score[pixels, first]
        first, second = np.where(swap, second, first), np.where(swap, first, second)
        other = np.where(np.arange(k)[None, :] == first[:, None], second[:, None], first[:, None])
        from_other = score[pixels[:, None], other] + move
        if frozen is not None:
            from_other[frozen[t - 1]] = -np.inf
        from_self = score + stay
        keep = from_self >= from_other
        back[t] = np.where(keep, np.arange(k)[None, :], other)
        score = np.where(keep, from_self, from_other) + log_e[t]
    path = np.empty((t_n, p_n), dtype=np.int64)
    path[-1] = score.argmax(axis=1)
    for t in range(t_n - 1, 0, -1):
        path[t - 1] = back[t][pixels, path[t]]
    return path


def marginals(proba: np.ndarray, empty: np.ndarray, years: list[int], prior: ChangePrior,
              frozen: np.ndarray | None = None) -> np.ndarray:
    """P(class in year t | every year's evidence), (years, pixels, classes), by scaled forward-backward;
    ``frozen`` as in :func:`viterbi`."""
    return _marginals(np.exp(_evidence(proba, empty)), years, prior, frozen)


def _marginals(e: np.ndarray, years: list[int], prior: ChangePrior, frozen: np.ndarray | None) -> np.ndarray:
    """:func:`marginals` from the evidence (years, pixels, classes)."""
    t_n = e.shape[0]
    k = e.shape[2]

    def step(v: np.ndarray, t: int) -> np.ndarray:
        stay, move = prior.stay_move(years[t + 1] - years[t])
        moved = move * v.sum(axis=1, keepdims=True) + (stay - move) * v
        return moved if frozen is None else np.where(frozen[t][:, None], v, moved)

    alpha = np.empty_like(e)
    a = e[0] / k
    alpha[0] = a / a.sum(axis=1, keepdims=True)
    for t in range(1, t_n):
        a = step(alpha[t - 1], t - 1) * e[t]
        alpha[t] = a / a.sum(axis=1, keepdims=True)
    beta = np.ones_like(e)
    for t in range(t_n - 2, -1, -1):
        b = step(beta[t + 1] * e[t + 1], t)  # the matrix is symmetric
        beta[t] = b / b.sum(axis=1, keepdims=True)
    post = alpha * beta
    return post / post.sum(axis=2, keepdims=True)


def change_prior(evidence_ratio: float, n_classes: int) -> ChangePrior:
    """The prior under which a change from one class to another needs ``evidence_ratio`` times more
    evidence than keeping the class: move / stay = 1 / ratio, i.e. change = (K - 1) / (ratio + K - 1)."""
    if not evidence_ratio > 1:
        raise LcflowError(f"consistency evidence ratio {evidence_ratio} must be above 1 (1: any evidence for "
                          "a change is enough, as in independent annual maps)")
    return ChangePrior((n_classes - 1) / (evidence_ratio + n_classes - 1), n_classes)


def small_changes(path: np.ndarray, valid: np.ndarray, shape: tuple[int, int], min_px: int) -> np.ndarray:
    """(years - 1, pixels): pixels whose change between year t and t + 1 is part of a patch (8-connected)
    of fewer than ``min_px`` changed pixels."""
    small = np.zeros((path.shape[0] - 1, path.shape[1]), dtype=bool)
    for t in range(path.shape[0] - 1):
        changed = (path[t] != path[t + 1]) & valid[t] & valid[t + 1]
        patches, n = ndimage.label(changed.reshape(shape), structure=np.ones((3, 3), dtype=bool))
        if n:
            sizes = np.bincount(patches.ravel())
            small[t] = ((sizes < min_px) & (np.arange(n + 1) > 0))[patches.ravel()]
    return small


def smooth(proba: np.ndarray, empty: np.ndarray, years: list[int], evidence_ratio: float,
           min_change_px: int = 1, shape: tuple[int, int] | None = None,
           rounds: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Consistent class indices (years, pixels) and their confidence 0..1 given all years.

    ``proba`` is (years, pixels, classes), ``empty`` (years, pixels) marks years without data there.
    Where ``min_change_px`` > 1, changes in patches smaller than that (pixels in a ``shape`` = (rows,
    cols) window) are refused and the pixels' sequences found again without them, for up to ``rounds``
    rounds (a refused change can move a sequence's change to another pair of years).
    """
    if proba.ndim != 3 or empty.shape != proba.shape[:2] or len(years) != proba.shape[0]:
        raise LcflowError(f"probabilities {proba.shape}, no-data mask {empty.shape} and {len(years)} years disagree")
    if list(years) != sorted(set(years)):
        raise LcflowError(f"years {years} must increase")
    prior = change_prior(evidence_ratio, proba.shape[2])
    log_e = _evidence(proba, empty)
    path = _viterbi(log_e, years, prior, None)
    frozen = None
    if min_change_px > 1 and len(years) > 1:
        if shape is None or shape[0] * shape[1] != proba.shape[1]:
            raise LcflowError(f"a minimum change patch needs the window's shape (got {shape} for {proba.shape[1]} pixels)")
        frozen = np.zeros((len(years) - 1, proba.shape[1]), dtype=bool)
        for _ in range(rounds):
            small = small_changes(path, ~empty, shape, min_change_px) & ~frozen
            if not small.any():
                break
            frozen |= small
            # a pixel's sequence depends on its own evidence and refusals alone: only those with a new
            # refusal are found again (a few percent of a window), the same as finding every pixel again
            again = np.flatnonzero(small.any(axis=0))
            path[:, again] = _viterbi(log_e[:, again], years, prior, frozen[:, again])
    post = _marginals(np.exp(log_e), years, prior, frozen)
    confidence = np.take_along_axis(post, path[..., None], axis=2)[..., 0]
    return path, confidence
