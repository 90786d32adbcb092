"""The hidden Markov model of consistent maps (lcflow.maps.hmm, its compiled kernels in
lcflow.maps.forward_backward): paths and marginals against every sequence scored, ties, the change prior,
and small change patches refused."""

import itertools

import numpy as np
import pytest

from lcflow.errors import LcflowError
from lcflow.maps.hmm import (
    PROBABILITY_FLOOR,
    ChangePrior,
    change_prior,
    marginals,
    small_changes,
    smooth,
    viterbi,
)
from lcflow.maps.predict import PROBABILITY_SCALE


def _brute_force(proba, empty, years, prior):
    """Every class sequence of every pixel scored: the best one and each year's marginals."""
    t_n, p_n, k = proba.shape
    log_e = np.log(np.maximum(proba, PROBABILITY_FLOOR))
    log_e[empty] = 0
    best, post = [], np.zeros(proba.shape)
    for p in range(p_n):
        scores = {}
        for seq in itertools.product(range(k), repeat=t_n):
            s = log_e[0, p, seq[0]] - np.log(k)
            for t in range(1, t_n):
                stay, move = prior.stay_move(years[t] - years[t - 1])
                s += np.log(stay if seq[t] == seq[t - 1] else move) + log_e[t, p, seq[t]]
            scores[seq] = s
        best.append(max(scores.values()))
        z = np.logaddexp.reduce(list(scores.values()))
        for seq, s in scores.items():
            for t in range(t_n):
                post[t, p, seq[t]] += np.exp(s - z)
    return np.array(best), post


def _path_score(path, proba, empty, years, prior):
    log_e = np.log(np.maximum(proba, PROBABILITY_FLOOR))
    log_e[empty] = 0
    p = np.arange(proba.shape[1])
    s = log_e[0, p, path[0]] - np.log(proba.shape[2])
    for t in range(1, len(years)):
        stay, move = prior.stay_move(years[t] - years[t - 1])
        s = s + np.where(path[t] == path[t - 1], np.log(stay), np.log(move)) + log_e[t, p, path[t]]
    return s


@pytest.mark.parametrize("seed", range(6))
def test_viterbi_and_marginals_match_every_sequence_scored(seed):
    rng = np.random.default_rng(seed)
    t_n, k = int(rng.integers(2, 5)), int(rng.integers(2, 5))
    years = sorted(rng.choice(np.arange(2016, 2026), t_n, replace=False).tolist())  # gaps of several years
    proba = rng.dirichlet(np.full(k, 0.5), size=(t_n, 15))
    empty = rng.random((t_n, 15)) < 0.15
    prior = ChangePrior(float(rng.uniform(0.02, 0.4)), k)
    best, post = _brute_force(proba, empty, years, prior)
    path = viterbi(proba, empty, years, prior)
    assert np.allclose(_path_score(path, proba, empty, years, prior), best)
    assert np.allclose(marginals(proba, empty, years, prior), post)


def _marginals_as_arrays(e, years, prior, frozen):
    """Forward-backward in numpy array expressions: the arithmetic the compiled recursion keeps to the bit."""
    k = e.shape[2]

    def step(v, t):
        stay, move = prior.stay_move(years[t + 1] - years[t])
        moved = move * v.sum(axis=1, keepdims=True) + (stay - move) * v
        return moved if frozen is None else np.where(frozen[t][:, None], v, moved)

    alpha = np.empty_like(e)
    a = e[0] / k
    alpha[0] = a / a.sum(axis=1, keepdims=True)
    for t in range(1, e.shape[0]):
        a = step(alpha[t - 1], t - 1) * e[t]
        alpha[t] = a / a.sum(axis=1, keepdims=True)
    beta = np.ones_like(e)
    for t in range(e.shape[0] - 2, -1, -1):
        b = step(beta[t + 1] * e[t + 1], t)
        beta[t] = b / b.sum(axis=1, keepdims=True)
    post = alpha * beta
    return post / post.sum(axis=2, keepdims=True)


@pytest.mark.parametrize("k", [2, 5, 13, 130])  # 130: numpy's pairwise sum splits the classes in two
def test_the_compiled_marginals_equal_numpy_s_array_arithmetic_to_the_bit(k):
    rng = np.random.default_rng(k)
    years = [2015, 2016, 2018, 2021]
    proba = np.round(rng.dirichlet(np.full(k, 0.3), size=(4, 3000)) * PROBABILITY_SCALE) / PROBABILITY_SCALE
    empty = rng.random((4, 3000)) < 0.1
    frozen = rng.random((3, 3000)) < 0.1
    prior = change_prior(4.0, k)
    e = np.exp(np.where(empty[..., None], 0.0, np.log(np.maximum(proba, PROBABILITY_FLOOR))))
    for refused in (None, frozen):
        np.testing.assert_array_equal(marginals(proba, empty, years, prior, refused),
                                      _marginals_as_arrays(e, years, prior, refused))


def test_tied_best_classes_go_to_the_lowest_index_on_every_machine():
    """Year one cannot tell classes 4, 5 and 9 of 13 apart; year two says class 0, and the evidence (0.3
    against 0.01 for having been 0 all along) outweighs the change prior: the path came from 4, the lowest
    of the tied classes (numpy's argpartition on an AVX-512 machine chose 5)."""
    k = 13
    first = np.full(k, 0.01)
    first[[4, 5, 9]] = 0.3
    second = np.full(k, 0.005)
    second[0] = 1 - 0.005 * (k - 1)
    proba = np.stack([first / first.sum(), second])[:, None, :]
    path = viterbi(proba, np.zeros((2, 1), bool), [2018, 2019], change_prior(4.0, k))
    assert path[:, 0].tolist() == [4, 0]


def _viterbi_step_by_step(proba, empty, years, prior):
    """The Viterbi recursion over every pixel and class, in plain Python: ties go to the lowest index at
    the end and to staying along the way."""
    t_n, p_n, k = proba.shape
    log_e = np.log(np.maximum(proba, PROBABILITY_FLOOR, dtype=np.float64))
    log_e[empty] = 0.0
    paths = np.empty((t_n, p_n), dtype=np.int64)
    for p in range(p_n):
        score = [log_e[0, p, j] - np.log(k) for j in range(k)]
        back = []
        for t in range(1, t_n):
            log_stay, log_move = (np.log(v) for v in prior.stay_move(years[t] - years[t - 1]))
            step, nxt = [], []
            for j in range(k):
                other = max((i for i in range(k) if i != j), key=lambda i: (score[i], -i))
                from_self, from_other = score[j] + log_stay, score[other] + log_move
                step.append(j if from_self >= from_other else other)
                nxt.append(max(from_self, from_other) + log_e[t, p, j])
            back.append(step)
            score = nxt
        paths[-1, p] = max(range(k), key=lambda j: (score[j], -j))
        for t in range(t_n - 1, 0, -1):
            paths[t - 1, p] = back[t - 1][paths[t, p]]
    return paths


@pytest.mark.parametrize("seed", range(3))
def test_steady_pixels_take_the_path_the_recursion_finds_even_among_ties(seed):
    """A pixel whose best class is the same every year takes it without the recursion; with few
    distinct probabilities (many ties, zeros under the floor, years without data) the paths are still
    the recursion's, class for class."""
    rng = np.random.default_rng(seed)
    t_n, k, p_n = 3, 5, 2000
    proba = rng.choice([0.0, 0.0005, 0.1, 0.3, 0.6], size=(t_n, p_n, k))
    steady = rng.random(p_n) < 0.5  # half the pixels repeat their first year
    proba[1:, steady] = proba[0, steady]
    proba[:, :50] = 0.0  # every class under the floor: all tie
    empty = rng.random((t_n, p_n)) < 0.05
    years = [2018, 2019, 2021]
    prior = change_prior(4.0, k)
    expected = _viterbi_step_by_step(proba, empty, years, prior)
    np.testing.assert_array_equal(viterbi(proba, empty, years, prior), expected)
    assert (expected[0] == expected[1])[steady].mean() > 0.9


def test_stay_and_move_over_several_years_are_the_matrix_power():
    prior = ChangePrior(0.1, 4)
    stay, move = prior.stay_move(1)
    a = np.full((4, 4), move) + np.eye(4) * (stay - move)
    for n in (2, 3, 5):
        s, m = prior.stay_move(n)
        power = np.linalg.matrix_power(a, n)
        assert np.isclose(power[0, 0], s) and np.isclose(power[0, 1], m)
    assert prior.stay_move(3)[1] > prior.stay_move(1)[1]  # a gap allows more change
    with pytest.raises(LcflowError, match="must lie between"):
        ChangePrior(0.8, 4)
    with pytest.raises(LcflowError, match="must be above 1"):
        change_prior(1.0, 4)


def test_a_change_needs_the_evidence_ratio():
    """Two classes, two years: the map changes class exactly when the change is ``ratio`` times likelier."""
    ratio = 4.0
    prior = change_prior(ratio, 2)
    # year 1 sure of class 0 (odds 9:1); year 2 favours class 1 by odds q:1
    odds = np.array([1.5, 3.0, 9 * ratio * 0.9 / 9, 3.9, 4.1, 8.0, 40.0])
    p2 = np.stack([1 / (1 + odds), odds / (1 + odds)], axis=1)
    p1 = np.tile([0.9, 0.1], (len(odds), 1))
    path = viterbi(np.stack([p1, p2]), np.zeros((2, len(odds)), bool), [2018, 2019], prior)
    # the best stable sequence is (0, 0) while odds < 9 (else (1, 1)); a change (0, 1) wins when
    # 0.9 * p2(1) * move > max(0.9 * p2(0), 0.1 * p2(1)) * stay, i.e. odds > ratio
    changed = path[0] != path[1]
    assert changed.tolist() == (odds > ratio).tolist()
    independent = np.stack([p1, p2]).argmax(axis=2)
    assert (independent[0] != independent[1]).sum() > changed.sum()


def test_a_year_without_data_says_nothing():
    proba = np.array([[[0.9, 0.1]], [[0.5, 0.5]], [[0.2, 0.8]]])
    empty = np.array([[False], [True], [False]])
    path, confidence = smooth(proba, empty, [2018, 2019, 2020], 4.0)
    other = proba.copy()
    other[1] = [[0.01, 0.99]]  # whatever the empty year's probabilities were
    assert np.array_equal(smooth(other, empty, [2018, 2019, 2020], 4.0)[0], path)
    assert np.allclose(smooth(other, empty, [2018, 2019, 2020], 4.0)[1], confidence)
    assert not np.array_equal(smooth(other, ~empty & False, [2018, 2019, 2020], 4.0)[1], confidence)
    with pytest.raises(LcflowError, match="must increase"):
        smooth(proba, empty, [2019, 2018, 2020], 4.0)


def test_small_change_patches_are_refused_and_the_rest_kept():
    path = np.zeros((2, 10 * 10), dtype=int)
    after = path[1].reshape(10, 10)
    after[0:3, 0:3] = 1  # 9 px
    after[6:10, 5:9] = 2  # 16 px
    valid = np.ones((2, 100), bool)
    small = small_changes(path, valid, (10, 10), 10)
    assert small[0].reshape(10, 10)[0:3, 0:3].all() and small[0].sum() == 9


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_refused_changes_find_again_only_their_pixels_as_finding_every_pixel_would(seed):
    """smooth finds again only the sequences of pixels with a new refusal; finding every pixel's
    sequence again in each round (the definition) gives the same paths and confidences to the bit."""
    rng = np.random.default_rng(seed)
    years, shape, k = [2018, 2019, 2020], (40, 40), 5
    proba = rng.dirichlet(np.full(k, 0.4), size=(3, shape[0] * shape[1]))
    empty = rng.random((3, shape[0] * shape[1])) < 0.05
    path, confidence = smooth(proba, empty, years, 4.0, min_change_px=6, shape=shape)

    prior = change_prior(4.0, k)
    expected = viterbi(proba, empty, years, prior)
    frozen = np.zeros((2, proba.shape[1]), bool)
    rounds = 0
    for _ in range(3):
        small = small_changes(expected, ~empty, shape, 6) & ~frozen
        if not small.any():
            break
        rounds += 1
        frozen |= small
        expected = viterbi(proba, empty, years, prior, frozen)
    post = marginals(proba, empty, years, prior, frozen)
    assert rounds >= 1  # some changes were refused, so the subset was found again
    np.testing.assert_array_equal(path, expected)
    np.testing.assert_array_equal(confidence, np.take_along_axis(post, expected[..., None], axis=2)[..., 0])
