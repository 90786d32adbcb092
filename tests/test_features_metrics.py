import numpy as np

from lcflow.features import Standardiser, fill_gaps, prepare
from lcflow.metrics import scores


def test_fill_gaps_interpolates_in_time():
    nan = np.nan
    x = np.array([[nan, 2.0, nan, nan, 8.0, nan]], dtype=np.float32)[..., None]
    assert fill_gaps(x)[0, :, 0].tolist() == [2.0, 2.0, 4.0, 6.0, 8.0, 8.0]
    empty = np.full((1, 4, 1), nan, dtype=np.float32)
    assert np.isnan(fill_gaps(empty)).all()
    full = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    assert np.array_equal(fill_gaps(full), full)


def test_prepare_standardises_and_flags_observations():
    rng = np.random.default_rng(0)
    x = rng.normal(100, 10, (50, 4, 3)).astype(np.float32)
    x[0, 1] = np.nan
    x[1] = np.nan
    s = Standardiser.fit(x)
    assert np.allclose(Standardiser.from_dict(s.to_dict()).mean, s.mean)
    out, empty = prepare(x, s)
    assert out.shape == (50, 4, 4)
    assert empty.tolist() == [False, True] + [False] * 48
    assert out[0, 1, 3] == 0.0 and out[0, 0, 3] == 1.0
    assert abs(float(out[2:, :, :3].mean())) < 0.2 and np.isfinite(out).all()


def test_scores():
    truth = np.array([1, 1, 1, 2, 2, 3])
    pred = np.array([1, 1, 2, 2, 2, 3])
    s = scores(truth, pred, {1: "a", 2: "b", 3: "c"})
    assert s["overall_accuracy"] == 5 / 6
    assert s["per_class"]["1"]["recall"] == 2 / 3 and s["per_class"]["2"]["precision"] == 2 / 3
    assert s["confusion_matrix"]["matrix"] == [[2, 1, 0], [0, 2, 0], [0, 0, 1]]
    assert 0 < s["kappa"] < 1 and 0 < s["macro_f1"] < 1
    assert scores(truth, truth)["kappa"] == 1.0
