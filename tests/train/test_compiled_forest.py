"""The compiled traversal gives a forest's probabilities as scikit-learn's predict_proba gives them."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.ensemble import RandomForestClassifier

from lcflow.train.models.compiled_forest import BLOCK_BYTES, MIN_BLOCK, CompiledForest, block_rows
from lcflow.train.models.rf import Model as RF


def _table(seed: int, rows: int = 600, features: int = 12, classes: int = 4):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, features)).astype(np.float32)
    y = (x[:, 0] > 0).astype(int) + 2 * (x[:, 1] + 0.5 * rng.normal(size=rows) > 0.3)
    return x, y % classes


def _same(forest: RandomForestClassifier, x: np.ndarray, threads: int | None = None) -> np.ndarray:
    expected = forest.predict_proba(x)
    got = CompiledForest(forest).predict_proba(x, threads)
    assert got.shape == expected.shape and got.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert (got.argmax(1) == expected.argmax(1)).all()
    return got


@pytest.mark.parametrize("params", [
    {},  # trees grown until pure, as lcflow's default
    {"max_depth": 3, "min_samples_leaf": 5, "max_features": 0.5, "class_weight": "balanced", "criterion": "entropy"},
    {"max_leaf_nodes": 20},  # grown best-first: node ids in another order
])
def test_the_probabilities_are_scikit_learns(params):
    x, y = _table(0)
    forest = RandomForestClassifier(25, random_state=1, **params).fit(x, y)
    rows = np.random.default_rng(5).normal(size=(3 * MIN_BLOCK + 17, x.shape[1])).astype(np.float32)  # a short last block
    _same(forest, rows)
    _same(forest, rows, threads=1)


def test_pure_leaves_vote_and_the_sum_is_scikit_learns_to_the_bit():
    """A pure leaf adds one to its class; a leaf of several classes adds its fractions. A forest of both
    kinds gives scikit-learn's probabilities, and one of pure leaves only (lcflow's) gives them exactly."""
    x, y = _table(6)
    rows = np.random.default_rng(7).normal(size=(2 * MIN_BLOCK + 3, x.shape[1])).astype(np.float32)
    pure = RandomForestClassifier(20, random_state=0).fit(x, y)
    compiled = CompiledForest(pure)
    leaves = compiled.child[0::2] == np.arange(len(compiled.feature))
    assert (compiled.leaf_class[leaves] >= 0).all() and len(compiled.impure) == 0
    np.testing.assert_array_equal(compiled.predict_proba(rows), pure.predict_proba(rows))
    mixed = RandomForestClassifier(20, min_samples_leaf=3, random_state=0).fit(x, y)
    compiled = CompiledForest(mixed)
    leaves = compiled.child[0::2] == np.arange(len(compiled.feature))
    kinds = compiled.leaf_class[leaves] >= 0
    assert kinds.any() and not kinds.all() and len(compiled.impure) == (~kinds).sum()
    _same(mixed, rows)


@pytest.mark.parametrize("min_samples_leaf", [1, 4])  # pure leaves only; leaves of several classes too
def test_the_probabilities_are_the_same_to_the_bit_at_any_block(min_samples_leaf):
    """Each row sums its trees in the same order whatever rows go down a tree beside it."""
    x, y = _table(8)
    forest = RandomForestClassifier(15, min_samples_leaf=min_samples_leaf, random_state=2).fit(x, y)
    rows = np.random.default_rng(9).normal(size=(1000, x.shape[1])).astype(np.float32)
    compiled = CompiledForest(forest)
    chosen = compiled.predict_proba(rows)
    for block in (1, 7, 256, 999, 5000):
        np.testing.assert_array_equal(compiled.predict_proba(rows, block=block), chosen)
    _same(forest, rows)


@pytest.mark.parametrize("rows, features, threads, expected", [
    (65_536, 132, 2, BLOCK_BYTES // (4 * 132)),  # a 256 px window of 12 steps x 11 features on a laptop
    (65_536, 132, 48, 342),  # on a 48-core node: four blocks a thread, not 16 blocks in all
    (10, 132, 2, MIN_BLOCK),  # a few rows: one short block
    (1_000_000, 20_000, 4, MIN_BLOCK),  # wide rows: never under MIN_BLOCK
])
def test_a_block_holds_what_the_cache_holds_and_every_thread_has_blocks(rows, features, threads, expected):
    assert block_rows(rows, features, threads) == expected


def _rows_beside_splits(forest: RandomForestClassifier, x: np.ndarray) -> np.ndarray:
    """For every split, a row of ``x`` with the split's feature at the float32 just under, nearest to and
    just over its threshold."""
    rows = []
    for estimator in forest.estimators_:
        tree = estimator.tree_
        for node in np.flatnonzero(tree.children_left >= 0):
            nearest = np.float32(tree.threshold[node])
            for value in (np.nextafter(nearest, np.float32(-np.inf)), nearest, np.nextafter(nearest, np.float32(np.inf))):
                row = x[node % len(x)].copy()
                row[tree.feature[node]] = value
                rows.append(row)
    return np.array(rows, np.float32)


def test_a_value_beside_a_split_goes_where_scikit_learn_sends_it():
    """Each threshold is a float64 between two float32 values: the float32 just under, at and over it
    (and the one rounded to nearest) must go down the same side as in scikit-learn."""
    x, y = _table(1, rows=300, features=4)
    x = (x * 1e-3 + 1.0).astype(np.float32)  # thresholds where float32 steps are coarse against float64 midpoints
    forest = RandomForestClassifier(10, random_state=0).fit(x, y)
    rows = _rows_beside_splits(forest, x)
    # the hard cases are there: float32 values that round-to-nearest thresholds would send the other way
    rounded = forest.estimators_[0].tree_.threshold.astype(np.float32).astype(np.float64)
    assert (rounded > forest.estimators_[0].tree_.threshold).any()
    _same(forest, rows)


def test_rows_with_a_missing_value_follow_the_side_each_split_learnt():
    x, y = _table(2)
    x[::5, 2] = np.nan  # trees trained with missing values send NaN where it went in training
    forest = RandomForestClassifier(20, random_state=0).fit(x, y)
    rows = np.random.default_rng(3).normal(size=(1000, x.shape[1])).astype(np.float32)
    rows[::3, 2] = np.nan
    rows[1::7, 5] = np.nan
    _same(forest, rows)
    rows[:] = np.nan
    _same(forest, rows)


def test_a_forest_of_single_leaves():
    x, _ = _table(3, rows=50)
    stump = RandomForestClassifier(5, max_depth=1, random_state=0).fit(x, np.zeros(len(x), int))  # one class: roots are leaves
    assert all(e.tree_.node_count == 1 for e in stump.estimators_)
    _same(stump, x)


@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_an_infinite_value_is_refused_as_scikit_learn_refuses_it(value):
    x, y = _table(4)
    forest = RandomForestClassifier(5, random_state=0).fit(x, y)
    rows = x.copy()
    rows[7, 3], rows[8, 2] = value, np.nan
    with pytest.raises(ValueError, match="infinit"):
        forest.predict_proba(rows)
    with pytest.raises(ValueError, match="rows hold an infinite value"):
        CompiledForest(forest).predict_proba(rows)


def test_the_wrong_number_of_features_is_refused():
    x, y = _table(4)
    forest = RandomForestClassifier(5, random_state=0).fit(x, y)
    with pytest.raises(ValueError, match="takes 12 features, the rows have 11"):
        CompiledForest(forest).predict_proba(x[:, :11])


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**16), classes=st.integers(2, 9), depth=st.one_of(st.none(), st.integers(1, 12)),
       rows=st.integers(1, 700))
def test_any_forest_any_rows(seed, classes, depth, rows):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(200, 7)).astype(np.float32)
    y = rng.integers(0, classes, 200)
    forest = RandomForestClassifier(8, max_depth=depth, random_state=seed).fit(x, y)
    _same(forest, rng.normal(size=(rows, 7)).astype(np.float32) * rng.choice([0.1, 1, 10]))


def test_lcflows_forest_predicts_through_the_compiled_traversal_by_default(monkeypatch):
    x, y = _table(5)
    series = x.reshape(len(x), 3, 4)
    compiled = RF({"n_estimators": 30, "n_jobs": 1}, n_features=4, steps=3, n_classes=6)
    compiled.fit(series, y, None, None)
    assert compiled.params["predict_engine"] == "compiled"
    plain = RF({"n_estimators": 30, "n_jobs": 1, "predict_engine": "scikit-learn"}, n_features=4, steps=3, n_classes=6)
    plain.forest = compiled.forest
    expected = plain.predict_proba(series)
    assert expected.shape == (len(x), 6) and not expected[:, 4:].any()  # classes the forest never saw stay 0

    def refuse(_):
        raise AssertionError("scikit-learn's predict_proba was called")

    monkeypatch.setattr(compiled.forest, "predict_proba", refuse)
    np.testing.assert_array_equal(compiled.predict_proba(series), expected)


@pytest.mark.parametrize("min_samples_leaf, chunk_bytes", [(1, None), (4, None), (4, 8 * 15 * 37)])
def test_the_tensors_engine_gives_the_compiled_probabilities_to_the_bit(min_samples_leaf, chunk_bytes, monkeypatch):
    """Trees as torch tensors (here on the CPU; a GPU node runs the same code) walk each row to the same
    leaves and sum them in the same order, in chunks of any size; rows with a missing value go to
    scikit-learn as in the compiled engine."""
    from lcflow.train.models import tensor_forest

    if chunk_bytes:
        monkeypatch.setitem(tensor_forest.CHUNK_BYTES, "cpu", chunk_bytes)  # 37 rows a chunk: a short last one
    x, y = _table(10)
    forest = RandomForestClassifier(15, min_samples_leaf=min_samples_leaf, random_state=3).fit(x, y)
    rows = np.concatenate([np.random.default_rng(11).normal(size=(500, x.shape[1])), _rows_beside_splits(forest, x)])
    rows = rows.astype(np.float32)
    rows[::9, 4] = np.nan
    compiled = CompiledForest(forest)
    tensors = tensor_forest.TensorForest(compiled)
    np.testing.assert_array_equal(tensors.predict_proba(rows), compiled.predict_proba(rows))
    _same(forest, rows)
    stump = RandomForestClassifier(3, max_depth=1, random_state=0).fit(x, np.zeros(len(x), int))
    np.testing.assert_array_equal(tensor_forest.TensorForest(CompiledForest(stump)).predict_proba(rows),
                                  stump.predict_proba(rows))


def test_lcflows_forest_maps_through_the_tensors_engine_when_asked(monkeypatch):
    x, y = _table(12)
    series = x.reshape(len(x), 3, 4)
    model = RF({"n_estimators": 20, "n_jobs": 1, "predict_engine": "tensors"}, n_features=4, steps=3, n_classes=5)
    model.fit(series, y, None, None)
    model.place(0)
    assert model.device.type in ("cpu", "cuda")
    compiled = RF({"n_estimators": 20, "n_jobs": 1}, n_features=4, steps=3, n_classes=5)
    compiled.forest = model.forest
    assert compiled.device is None  # the CPU engines run on no torch device
    expected = compiled.predict_proba(series)
    assert not expected[:, 4].any()  # a class the forest never saw stays 0

    def refuse(*_):
        raise AssertionError("the compiled walk was taken")

    monkeypatch.setattr("lcflow.train.models.compiled_forest.traverse", refuse)
    np.testing.assert_array_equal(model.predict_proba(series), expected)
