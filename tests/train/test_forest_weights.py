"""A forest's weights file (skops): the forest comes back whole, and a file holding any other estimator is
refused, as lcflow trusts the types a forest holds alone."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from lcflow.train.models import rf


def test_a_forest_comes_back_whole_and_another_estimator_is_refused(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(200, 6)), rng.integers(0, 3, 200)
    forest = RandomForestClassifier(n_estimators=4, random_state=0).fit(x, y)
    io = rf._skops_io()
    io.dump(forest, tmp_path / "forest.skops")
    again = io.load(tmp_path / "forest.skops", trusted=rf.TRUSTED)
    np.testing.assert_array_equal(again.predict_proba(x), forest.predict_proba(x))
    # skops' own default would trust every scikit-learn estimator; lcflow's list is the forest's types alone
    io.dump(LogisticRegression().fit(x, y), tmp_path / "other.skops")
    with pytest.raises(io.exceptions.UntrustedTypesFoundException, match="LogisticRegression"):
        io.load(tmp_path / "other.skops", trusted=rf.TRUSTED)
