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

Both recursions run compiled (numba), the Viterbi a pixel at a time, the forward-backward on
``LANES`` pixels side by side, with the arithmetic of the array expressions they replaced: sums over
the classes in numpy's pairwise order, the logarithms taken by numpy. Where classes tie for a
pixel's best score, the lowest class index is the best (as ``argmax``), on every machine: numpy's
``argpartition``, used before, broke such ties by the CPU's instruction set.

The evidence is coded: each probability is an index into a table of the values it can take (a stored
probability raster's 256 uint8 levels: ``smooth_coded``), whose logarithm and its exponential numpy takes
once per table, not once per pixel and class; the recursions look them up, so no (years, pixels,
classes) array of float64 is made. Float probabilities are coded by their distinct values (``smooth``).
"""

from dataclasses import dataclass

import numba
import numpy as np
from scipy import ndimage

from lcflow.errors import LcflowError
from lcflow.maps.forward_backward import forward_backward

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
            raise LcflowError(
                f"consistency change probability {self.change} must lie between 0 and "
                f"{1 - 1 / self.n_classes:.3f} (1 - 1/classes; more means change is likelier than not)"
            )

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


@dataclass(frozen=True)
class CodedEvidence:
    """Probabilities (years, pixels, classes) as indices into ``levels``, the values they stand for; a
    year without data at a pixel (``empty``, (years, pixels)) says nothing."""

    codes: np.ndarray
    levels: np.ndarray
    empty: np.ndarray

    def __post_init__(self) -> None:  # as the compiled recursions take them, once
        object.__setattr__(self, "codes", np.ascontiguousarray(self.codes))
        object.__setattr__(self, "empty", np.ascontiguousarray(self.empty, dtype=np.bool_))

    @classmethod
    def of(cls, proba: np.ndarray, empty: np.ndarray) -> "CodedEvidence":
        """Float probabilities coded by their distinct values."""
        levels, codes = np.unique(proba, return_inverse=True)
        return cls(codes.reshape(proba.shape), levels, empty)

    def log_levels(self) -> np.ndarray:
        """The log evidence of each level (a probability under the floor counts as the floor)."""
        return np.log(np.maximum(self.levels, PROBABILITY_FLOOR, dtype=np.float64))

    def pixels(self, which: np.ndarray) -> "CodedEvidence":
        return CodedEvidence(self.codes[:, which], self.levels, self.empty[:, which])


def viterbi(
    proba: np.ndarray,
    empty: np.ndarray,
    years: list[int],
    prior: ChangePrior,
    frozen: np.ndarray | None = None,
) -> np.ndarray:
    """The most likely class index of every pixel in every year: (years, pixels) from (years, pixels, classes).

    O(years x pixels x classes): with one stay and one move probability, the best predecessor of class
    j is either j itself or the best of the others (the best overall, or the second best where j is it).

    Args:
        proba: (years, pixels, classes) class probabilities.
        empty: (years, pixels), True where a year has no data at a pixel (it says nothing there).
        years: the years, whose gaps the prior on change spans.
        prior: the probability of a change in one year.
        frozen: (years - 1, pixels), True where a change between year t and t + 1 is forbidden.
    """
    evidence = CodedEvidence.of(proba, empty)
    return _viterbi(evidence, evidence.log_levels(), years, prior, frozen)


def _viterbi(
    evidence: CodedEvidence,
    log_levels: np.ndarray,
    years: list[int],
    prior: ChangePrior,
    frozen: np.ndarray | None,
) -> np.ndarray:
    """:func:`viterbi` from coded evidence and its levels' logarithms."""
    t_n, p_n, k = evidence.codes.shape
    log_stay, log_move = _log_transitions(years, prior)
    return _viterbi_pixels(
        evidence.codes,
        evidence.empty,
        log_levels,
        np.log(k),
        log_stay,
        log_move,
        *_frozen_arg(frozen, t_n, p_n),
    )


def _transitions(years: list[int], prior: ChangePrior) -> list[tuple[float, float]]:
    """Stay and move probabilities of each step t - 1 -> t at index t (index 0 unused: (1, 1))."""
    return [(1.0, 1.0)] + [prior.stay_move(b - a) for a, b in zip(years, years[1:])]


def _log_transitions(years: list[int], prior: ChangePrior) -> tuple[np.ndarray, np.ndarray]:
    """log stay and log move of each step (as :func:`_transitions`), taken by numpy's log."""
    steps = _transitions(years, prior)
    return np.array([np.log(stay) for stay, _ in steps]), np.array(
        [np.log(move) for _, move in steps]
    )


def _frozen_arg(frozen: np.ndarray | None, t_n: int, p_n: int) -> tuple[np.ndarray, bool]:
    """The refusal mask as the kernels take it: an array always, and whether it applies."""
    if frozen is None:
        return np.zeros((max(t_n - 1, 1), p_n), dtype=np.bool_), False
    return np.ascontiguousarray(frozen, dtype=np.bool_), True


@numba.njit(cache=True, nogil=True)
# pragma: no cover
def _viterbi_pixels(codes, empty, log_levels, log_k, log_stay, log_move, frozen, has_frozen):
    """Each pixel's best path: the best predecessor of class j is j itself or the best other class (the
    best overall, the lowest index among equals; for the best class itself, the best of the rest)."""
    t_n, p_n, k = codes.shape
    path = np.empty((t_n, p_n), dtype=np.int64)
    back = np.empty((t_n, k), dtype=np.int64)
    score = np.empty(k)
    nxt = np.empty(k)
    for p in range(p_n):
        steady = _steady_best(codes, empty, log_levels, p)
        if steady >= 0:
            for t in range(t_n):
                path[t, p] = steady
            continue
        for j in range(k):
            score[j] = (0.0 if empty[0, p] else log_levels[codes[0, p, j]]) - log_k
        for t in range(1, t_n):
            says = not empty[t, p]
            first = 0
            for j in range(1, k):
                if score[j] > score[first]:
                    first = j
            second = -1
            for j in range(k):
                if j != first and (second < 0 or score[j] > score[second]):
                    second = j
            refused = has_frozen and frozen[t - 1, p]
            for j in range(k):
                other = second if j == first else first
                from_other = -np.inf if refused or other < 0 else score[other] + log_move[t]
                from_self = score[j] + log_stay[t]
                log_e = log_levels[codes[t, p, j]] if says else 0.0
                if from_self >= from_other:
                    back[t, j] = j
                    nxt[j] = from_self + log_e
                else:
                    back[t, j] = other
                    nxt[j] = from_other + log_e
            for j in range(k):
                score[j] = nxt[j]
        best = 0
        for j in range(1, k):
            if score[j] > score[best]:
                best = j
        path[t_n - 1, p] = best
        for t in range(t_n - 1, 0, -1):
            path[t - 1, p] = back[t, path[t, p]]
    return path


#: the least lead of a steady class's last-year evidence over every lower class's that _steady_best takes
#: (far above the rounding of a path's score, which is a sum of a few dozen terms of magnitude under 100)
STEADY_LEAD = 1e-9


@numba.njit(cache=True, nogil=True)
def _steady_best(codes, empty, log_levels, p):  # pragma: no cover - compiled
    """The class that is the best (the lowest index among equals) in every year's evidence of pixel ``p``,
    whose last-year evidence leads every lower class's by ``STEADY_LEAD``; -1 where there is none or a
    year has no data. Its constant path is the Viterbi path: it takes the best of every year's evidence
    and only stays, which beat moves, so no other path scores as high, the lower classes end below it, and
    every back-pointer of it points to itself (self wins ties)."""
    t_n, _, k = codes.shape
    steady = -1
    for t in range(t_n):
        if empty[t, p]:
            return -1
        best, top = 0, log_levels[codes[t, p, 0]]
        # a running best taken by selects, not branches: the data decides them
        for j in range(1, k):
            value = log_levels[codes[t, p, j]]
            higher = value > top
            best = j if higher else best
            top = value if higher else top
        if t > 0 and best != steady:
            return -1
        steady = best
    last = log_levels[codes[t_n - 1, p, steady]]
    for j in range(steady):
        if not last - log_levels[codes[t_n - 1, p, j]] > STEADY_LEAD:
            return -1
    return steady


def marginals(
    proba: np.ndarray,
    empty: np.ndarray,
    years: list[int],
    prior: ChangePrior,
    frozen: np.ndarray | None = None,
) -> np.ndarray:
    """P(class in year t | every year's evidence), (years, pixels, classes), by scaled forward-backward.

    Args:
        proba: (years, pixels, classes) class probabilities.
        empty: (years, pixels), True where a year has no data at a pixel.
        years: the years.
        prior: the probability of a change in one year.
        frozen: (years - 1, pixels), True where a change between year t and t + 1 is forbidden.
    """
    evidence = CodedEvidence.of(proba, empty)
    return _marginals(evidence, np.exp(evidence.log_levels()), years, prior, frozen, None)


def _marginals(
    evidence: CodedEvidence,
    levels: np.ndarray,
    years: list[int],
    prior: ChangePrior,
    frozen: np.ndarray | None,
    path: np.ndarray | None,
) -> np.ndarray:
    """:func:`marginals` from coded evidence and each level's evidence; given a ``path`` (years, pixels),
    only the marginal of the path's class, (years, pixels, 1)."""
    t_n, p_n, k = evidence.codes.shape
    steps = _transitions(years, prior)
    move = np.array([m for _, m in steps])
    gain = np.array([s - m for s, m in steps])  # stay - move, as a Python float each
    along = path is not None
    return forward_backward(
        evidence.codes,
        evidence.empty,
        levels,
        float(k),
        move,
        gain,
        *_frozen_arg(frozen, t_n, p_n),
        np.ascontiguousarray(path) if along else np.zeros((t_n, p_n), np.int64),
        along,
    )


def change_prior(evidence_ratio: float, n_classes: int) -> ChangePrior:
    """The prior under which a change from one class to another needs ``evidence_ratio`` times more
    evidence than keeping the class: move / stay = 1 / ratio, i.e. change = (K - 1) / (ratio + K - 1)."""
    if not evidence_ratio > 1:
        raise LcflowError(
            f"consistency evidence ratio {evidence_ratio} must be above 1 (1: any evidence for "
            "a change is enough, as in independent annual maps)"
        )
    return ChangePrior((n_classes - 1) / (evidence_ratio + n_classes - 1), n_classes)


def small_changes(
    path: np.ndarray, valid: np.ndarray, shape: tuple[int, int], min_px: int
) -> np.ndarray:
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


def smooth(
    proba: np.ndarray,
    empty: np.ndarray,
    years: list[int],
    evidence_ratio: float,
    min_change_px: int = 1,
    shape: tuple[int, int] | None = None,
    rounds: int = 3,
) -> tuple[np.ndarray, np.ndarray]:
    """Consistent class indices (years, pixels) and their confidence 0..1 given all years.

    Args:
        proba: (years, pixels, classes) class probabilities.
        empty: (years, pixels), True where a year has no data at a pixel.
        years: the years.
        evidence_ratio: how much likelier a change must make the years' evidence than no change.
        min_change_px: changes in patches of fewer pixels are refused, and the pixels' sequences found
            again without them.
        shape: (rows, cols) of the window the pixels fill, for the patches (needed when
            ``min_change_px`` > 1).
        rounds: at most this many rounds of refusals (a refused change can move a sequence's change to
            another pair of years).
    """
    if proba.ndim != 3 or empty.shape != proba.shape[:2] or len(years) != proba.shape[0]:
        raise LcflowError(
            f"probabilities {proba.shape}, no-data mask {empty.shape} and {len(years)} years disagree"
        )
    return smooth_coded(
        CodedEvidence.of(proba, empty), years, evidence_ratio, min_change_px, shape, rounds
    )


def smooth_coded(
    evidence: CodedEvidence,
    years: list[int],
    evidence_ratio: float,
    min_change_px: int = 1,
    shape: tuple[int, int] | None = None,
    rounds: int = 3,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`smooth` of coded probabilities (a stored probability raster's uint8 levels, say).

    Args:
        evidence: the coded probabilities, their levels and the years without data.
        years: the years.
        evidence_ratio: how much likelier a change must make the years' evidence than no change.
        min_change_px: changes in patches of fewer pixels are refused.
        shape: (rows, cols) of the window the pixels fill.
        rounds: at most this many rounds of refusals.
    """
    t_n, p_n, k = evidence.codes.shape
    if evidence.empty.shape != (t_n, p_n) or len(years) != t_n:
        raise LcflowError(
            f"probabilities {evidence.codes.shape}, no-data mask {evidence.empty.shape} and "
            f"{len(years)} years disagree"
        )
    if list(years) != sorted(set(years)):
        raise LcflowError(f"years {years} must increase")
    prior = change_prior(evidence_ratio, k)
    log_levels = evidence.log_levels()
    path = _viterbi(evidence, log_levels, years, prior, None)
    frozen = None
    if min_change_px > 1 and len(years) > 1:
        if shape is None or shape[0] * shape[1] != p_n:
            raise LcflowError(
                f"a minimum change patch needs the window's shape (got {shape} for {p_n} pixels)"
            )
        frozen = np.zeros((len(years) - 1, p_n), dtype=bool)
        for _ in range(rounds):
            small = small_changes(path, ~evidence.empty, shape, min_change_px) & ~frozen
            if not small.any():
                break
            frozen |= small
            # a pixel's sequence depends on its own evidence and refusals alone: only those with a new
            # refusal are found again (a few percent of a window), the same as finding every pixel again
            again = np.flatnonzero(small.any(axis=0))
            path[:, again] = _viterbi(
                evidence.pixels(again), log_levels, years, prior, frozen[:, again]
            )
    confidence = _marginals(evidence, np.exp(log_levels), years, prior, frozen, path)[..., 0]
    return path, confidence
