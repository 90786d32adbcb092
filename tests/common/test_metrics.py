"""Accuracy measures (lcflow.common.metrics): scores of a confusion, and area-adjusted estimates with their
confidence intervals (Olofsson et al. 2014)."""

import numpy as np
import pytest

from lcflow.common.metrics import scores


def test_scores():
    truth = np.array([1, 1, 1, 2, 2, 3])
    pred = np.array([1, 1, 2, 2, 2, 3])
    s = scores(truth, pred, {1: "a", 2: "b", 3: "c"})
    assert s["overall_accuracy"] == 5 / 6
    assert s["per_class"]["1"]["recall"] == 2 / 3 and s["per_class"]["2"]["precision"] == 2 / 3
    assert s["confusion_matrix"]["matrix"] == [[2, 1, 0], [0, 2, 0], [0, 0, 1]]
    assert 0 < s["kappa"] < 1 and 0 < s["macro_f1"] < 1
    assert s["balanced_accuracy"] == pytest.approx((2 / 3 + 1 + 1) / 3)
    assert scores(truth, truth)["kappa"] == 1.0
    # the majority answer: high overall accuracy, balanced accuracy of one class in three
    assert scores(truth, np.ones(6, int))["balanced_accuracy"] == pytest.approx(1 / 3)


def test_area_adjusted_estimates_reproduce_olofsson_2014_table_8():
    """Olofsson et al. 2014 (RSE 148), the worked example: 4 strata of a 30 m change map."""
    from lcflow.common.metrics import area_adjusted

    counts = [[66, 0, 5, 4], [0, 55, 8, 12], [1, 0, 153, 11], [2, 1, 9, 313]]
    r = area_adjusted(counts, [200_000, 150_000, 3_200_000, 6_450_000], 900)
    assert np.round(r["area_ha"]).tolist() == [21158, 11686, 285770, 581386]
    assert np.round(r["area_ci95_ha"]).tolist() == [6158, 3756, 15510, 16282]
    assert np.round(r["users_accuracy"], 2).tolist() == [0.88, 0.73, 0.93, 0.96]
    assert np.round(r["producers_accuracy"], 2).tolist() == [0.75, 0.85, 0.93, 0.96]
    assert np.round(r["producers_accuracy_ci95"], 2).tolist() == [0.21, 0.25, 0.03, 0.02]
    assert round(r["overall_accuracy"], 3) == 0.947 and round(r["overall_accuracy_ci95"], 3) == 0.018
    assert sum(r["area_ha"]) == pytest.approx(sum(r["mapped_area_ha"]))  # areas are re-shared, not created
    with pytest.raises(ValueError, match="at least 2 sample points"):
        area_adjusted([[1, 0], [0, 5]], [10, 10], 100)
