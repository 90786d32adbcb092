"""Consistent annual maps: the hidden Markov model, change maps and the windowed job on small rasters."""

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import rasterio

from lcflow.common.raster import Grid
from lcflow.errors import LcflowError
from lcflow.labels import nomenclature
from lcflow.maps import change, change_summary
from lcflow.maps import consistent as consistent_maps
from lcflow.maps.consistency_settings import ConsistencySettings
from lcflow.maps.hmm import (
    PROBABILITY_FLOOR,
    ChangePrior,
    change_prior,
    marginals,
    small_changes,
    smooth,
    viterbi,
)
from lcflow.maps.predict import PROBABILITY_NODATA, PROBABILITY_SCALE


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


def _write_probabilities(path, proba, grid, classes, empty=None):
    """A probability raster as lcflow predict writes it, from (classes, rows, cols) probabilities."""
    data = np.round(proba * PROBABILITY_SCALE).astype(np.uint8)
    if empty is not None:
        data[:, empty] = PROBABILITY_NODATA
    with rasterio.open(path, "w", driver="GTiff", dtype="uint8", count=len(classes), nodata=PROBABILITY_NODATA,
                       **grid.profile()) as dst:
        dst.write(data)
        dst.update_tags(class_codes=json.dumps(classes), model="test",
                        class_names=json.dumps({str(c): f"class {c}" for c in classes}),
                        class_colors=json.dumps({str(c): [c % 256, 100, (200 - c) % 256] for c in classes}))


def _series(tmp_path, size=64):
    """Two years of 3 classes (codes 31, 32, 21): a 10 x 12 px block changes 31 -> 32; the classifier
    is right but unsure, and wrong on 60 scattered single pixels in the second year."""
    rng = np.random.default_rng(0)
    grid = Grid.from_bounds(32631, (640000, 5760000, 640000 + 10 * size, 5760000 + 10 * size), 10)
    classes = [21, 31, 32]
    truth = np.zeros((2, size, size), dtype=int)
    truth[:, :, size // 2:] = 1
    truth[1, 20:30, 40:52] = 2  # the change
    outside = np.flatnonzero(truth[0].ravel() == truth[1].ravel())
    flips = rng.choice(outside, 60, replace=False)
    paths = []
    for t in range(2):
        proba = np.full((3, size, size), 0.1)
        np.put_along_axis(proba, truth[t][None], 0.8, axis=0)
        seen = truth[t].ravel().copy()
        wrong = (seen[flips] + 1) % 3
        flat = proba.reshape(3, -1)
        if t == 1:
            flat[:, flips] = 0.2
            flat[wrong, flips] = 0.6  # a confident-looking error, in one year only
        empty = np.zeros((size, size), bool)
        empty[:4, :4] = True  # no data in a corner
        paths.append(tmp_path / f"p{t}.tif")
        _write_probabilities(paths[-1], proba, grid, classes, empty)
    return paths, truth, grid, classes


def _run(tmp_path, paths, block=64, name="out", **kw):
    d = tmp_path / name
    settings = {k: kw.pop(k) for k in ("evidence_ratio", "min_change_ha") if k in kw}
    out = consistent_maps.SeriesOutputs.of([d / "m18.tif", d / "m19.tif"], [d / "c18.tif", d / "c19.tif"],
                                           [d / "change.tif"], d / "summary.json")
    return consistent_maps.run(paths, [2018, 2019], out, ConsistencySettings(**settings), block=block, **kw), d


def test_consistent_maps_keep_stable_land_and_find_the_change(tmp_path):
    paths, truth, grid, classes = _series(tmp_path)
    # truth rasters in CLC level-3 codes, mapped to level 2 by the nomenclature (21, 31, 32)
    level3 = np.array([211, 311, 324])
    truths = []
    for t in range(2):
        truths.append(tmp_path / f"truth{t}.tif")
        with rasterio.open(truths[-1], "w", driver="GTiff", dtype="uint16", count=1, **grid.profile()) as dst:
            dst.write(level3[truth[t]].astype(np.uint16), 1)
    result, d = _run(tmp_path, paths, truths=truths, nomenclature=nomenclature.clc_level(2),
                     evidence_ratio=4, min_change_ha=0.05)
    assert result["min_change_px"] == 5
    with rasterio.open(d / "m18.tif") as a, rasterio.open(d / "m19.tif") as b, rasterio.open(d / "change.tif") as c:
        m18, m19, ch = a.read(1), b.read(1), c.read(1)
        assert a.tags(ns="IMAGE_STRUCTURE")["LAYOUT"] == "COG" and a.colormap(1)[31][:3] == (31, 100, 169)
        table = {r["code"]: r for r in json.loads(c.tags()["change_classes"])}
        assert c.colormap(1)[0][:3] == change.STABLE_COLOR
    codes = np.asarray(classes)
    expected = [codes[truth[0]], codes[truth[1]]]
    inside = np.ones(m18.shape, bool)
    inside[:4, :4] = False
    assert (m18[~inside] == 255).all() and (ch[~inside] == change.CHANGE_NODATA).all()
    assert np.array_equal(m18[inside], expected[0][inside]) and np.array_equal(m19[inside], expected[1][inside])
    block = np.zeros(m18.shape, bool)
    block[20:30, 40:52] = True
    change_code = 1 + 1 * 3 + 2  # index 1 (31) -> index 2 (32)
    assert (ch[block] == change_code).all() and (ch[inside & ~block] == change.STABLE).all()
    assert table[change_code]["from"] == 31 and table[change_code]["to"] == 32
    pair = result["pairs"][0]
    c, r = pair["consistent"], pair["raw"]
    assert c["pixels"] == 64 * 64 - 16
    assert c["change_matrix_ha"][1][2] == pytest.approx(120 * 100 / 1e4)  # 120 px of 100 m2
    assert c["agreement"] == pytest.approx(1 - 120 / c["pixels"])
    assert r["changed_fraction"] > c["changed_fraction"]  # the scattered errors changed the raw maps
    assert c["truth"]["stable_kept"] == 1.0 and c["truth"]["change_f1"] == 1.0
    assert r["truth"]["stable_kept"] < 0.99 and r["truth"]["change_f1"] < 0.9
    oa = result["truth_overall_accuracy"]
    assert oa["consistent"] == [1.0, 1.0] and oa["raw"][1] < 1.0
    tsv = change_summary.summary_table([d / "summary.json"]).splitlines()
    assert tsv[1].split("\t")[:3] == ["summary", "test", "2018-2019"]


def test_windows_give_the_maps_of_one_window(tmp_path):
    paths, *_ = _series(tmp_path)
    _run(tmp_path, paths, block=64, name="one")
    _run(tmp_path, paths, block=16, name="many")
    for f in ("m18.tif", "m19.tif", "c19.tif", "change.tif"):
        with rasterio.open(tmp_path / "one" / f) as a, rasterio.open(tmp_path / "many" / f) as b:
            assert np.array_equal(a.read(), b.read()), f


def test_years_of_different_models_are_refused_before_writing(tmp_path):
    paths, truth, grid, classes = _series(tmp_path)
    other = tmp_path / "other.tif"
    _write_probabilities(other, np.full((2, 64, 64), 0.5), grid, [21, 31])
    with pytest.raises(LcflowError, match="other.tif.*not of one model"):
        _run(tmp_path, [paths[0], other])
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    with pytest.raises(LcflowError, match="do not exist"):
        _run(tmp_path, [paths[0], tmp_path / "missing.tif"])


def test_the_change_figure_shows_the_map_and_matrix_of_its_pair(tmp_path):
    from lcflow.maps import quicklook

    paths, *_ = _series(tmp_path)
    result, d = _run(tmp_path, paths, min_change_ha=0.05)
    quicklook.change_figure(d / "change.tif", d / "summary.json", tmp_path / "c.png", "31UFT test")
    with rasterio.open(tmp_path / "c.png") as png:
        assert png.width >= 900 and png.count >= 3
        assert len(np.unique(png.read(1))) > 10  # a picture, not a blank page
    other = json.loads((d / "summary.json").read_text())
    other["pairs"][0]["years"] = [2019, 2020]
    (tmp_path / "other.json").write_text(json.dumps(other))
    with pytest.raises(LcflowError, match=r"has no pair of years \[2018, 2019\]"):
        quicklook.change_figure(d / "change.tif", tmp_path / "other.json", tmp_path / "d.png", "x")
    assert not (tmp_path / "d.png").exists()


def test_change_codes_name_every_ordered_pair():
    table = change.change_table([21, 31, 32], {21: "Arable", 31: "Forests", 32: "Scrub"}, {32: (1, 2, 3)})
    assert len(table) == 1 + 3 * 2 and table[0]["name"] == "no change"
    by_code = {r["code"]: r for r in table}
    assert by_code[1 + 1 * 3 + 2]["name"] == "Forests -> Scrub" and by_code[1 + 1 * 3 + 2]["color"] == [1, 2, 3]
    before, after = np.array([0, 1, 1, 2]), np.array([0, 2, 1, 0])
    codes = change.change_map(before, after, np.array([True, True, True, False]), 3)
    assert codes.tolist() == [0, 6, 0, change.CHANGE_NODATA]
    with pytest.raises(LcflowError, match="too many from-to pairs"):
        change.change_codes(256)


def test_a_single_year_series_is_that_year_s_map(tmp_path):
    paths, truth, grid, classes = _series(tmp_path)
    d = tmp_path / "single"
    result = consistent_maps.run(paths[:1], [2018], consistent_maps.SeriesOutputs.of([d / "m.tif"], [d / "c.tif"], [],
                                                                                     d / "s.json"))
    assert result["pairs"] == []
    with rasterio.open(d / "m.tif") as m, rasterio.open(paths[0]) as p:
        proba = p.read()
        empty = proba[0] == PROBABILITY_NODATA
        assert np.array_equal(m.read(1)[~empty], np.asarray(classes)[proba.argmax(axis=0)][~empty])
        assert (m.read(1)[empty] == 255).all()


def test_class_codes_beyond_a_byte_make_uint16_maps(tmp_path):
    grid = Grid.from_bounds(32631, (640000, 5760000, 640320, 5760320), 10)
    classes = [300, 1000, 65000]
    proba = np.zeros((3, 32, 32))
    proba[2] = 0.9
    proba[:2] = 0.05
    empty = np.zeros((32, 32), bool)
    empty[0, 0] = True
    paths = [tmp_path / "a.tif", tmp_path / "b.tif"]
    for p in paths:
        _write_probabilities(p, proba, grid, classes, empty)
    _, d = _run(tmp_path, paths)
    with rasterio.open(d / "m18.tif") as m:
        codes = m.read(1)
        assert m.dtypes[0] == "uint16" and m.nodata == 65535
        assert m.colormap(1)[65000][:3] == (65000 % 256, 100, (200 - 65000) % 256)
        assert codes[0, 0] == 65535 and (codes.ravel()[1:] == 65000).all()


def test_a_change_map_gets_a_stac_item_in_a_catalog(tmp_path):
    import pystac
    import pystac.validation

    from lcflow.maps import stac_items as stac_products

    paths, *_ = _series(tmp_path)
    _, d = _run(tmp_path, paths, min_change_ha=0.05)
    item = stac_products.change_item(d / "change.tif", "31UFT", "test", d / "summary.json")
    stac_products.write_item(item, d / "change.stac.json", tmp_path / "stac" / "catalog.json")
    stac_products.write_catalog([d / "change.stac.json"], tmp_path / "stac" / "catalog.json", "test")
    catalog = pystac.Catalog.from_file(str(tmp_path / "stac" / "catalog.json"))
    [read] = list(catalog.get_items())
    pystac.validation.validate_dict(read.to_dict(), extensions=[])
    assert read.properties["start_datetime"].startswith("2018-01-01") and read.properties["end_datetime"].startswith("2019-12-31")
    assert read.properties["lcflow:changed_fraction"] == pytest.approx(120 / (64 * 64 - 16))
    asset = read.assets["change"]
    assert Path(asset.get_absolute_href()) == (d / "change.tif").resolve() and asset.href == "./change.tif"
    classes = {c["value"]: c for c in asset.extra_fields["classification:classes"]}
    assert classes[6]["description"] == "class 31 -> class 32" and classes[6]["name"] == "class_31_class_32"
    assert classes[6]["color_hint"] == "{:02X}{:02X}{:02X}".format(32, 100, 168)  # the colour of class 32
    assert read.properties["proj:code"] == "EPSG:32631" and read.properties["proj:shape"] == [64, 64]


def test_the_raw_maps_class_is_numpys_argmax_of_the_stored_levels_ties_included():
    from lcflow.maps.consistent import first_max

    levels = np.random.default_rng(4).choice(np.array([0, 3, 127, 254, 255], np.uint8), size=(3, 5000, 13))
    np.testing.assert_array_equal(first_max(levels), levels.argmax(axis=2))
