"""A samples table made ready for training (lcflow.train.data.training_data): validation rows carved in
whole spatial blocks, or by row where the classes sit in too few blocks."""

import numpy as np
import pytest

from lcflow.labels import samples_table as samples
from lcflow.train.data import training_data

from .test_recipe import seasonal_table


def test_validation_rows_are_carved_in_whole_spatial_blocks(tmp_path):
    frame = seasonal_table({1: 200, 2: 120, 3: 60, 4: 20}, seed=3)
    frame[["x", "y"]] = np.random.default_rng(3).uniform(0, 5000, (len(frame), 2))  # parcels over a region
    table = samples.check(frame, "t")
    train, val, info = training_data.carve_validation(table, 0.2, seed=0)
    assert len(train.frame) + len(val.frame) == len(frame)
    assert info["source"] == "carved from train" and "spatial blocks of" in info["method"]
    side = float(info["method"].split("blocks of ")[1].split(" ")[0])

    def blocks(part):
        return set(zip(np.floor(part.frame["x"] / side), np.floor(part.frame["y"] / side)))

    assert not blocks(train) & blocks(val)  # no block on both sides
    share = val.frame["label"].value_counts() / frame["label"].value_counts()
    assert set(share.index) == {1, 2, 3, 4} and (share > 0.05).all()  # every class has val rows
    assert 0.1 < len(val.frame) / len(frame) < 0.35
    # without positions: stratified only
    plain = samples.check(frame.drop(columns=["x", "y"]), "t")
    _, val2, info2 = training_data.carve_validation(plain, 0.2, seed=0)
    assert "no sample positions" in info2["method"] and len(val2.frame) == pytest.approx(0.2 * len(frame), abs=2)


def test_classes_in_too_few_blocks_are_validated_by_row(tmp_path):
    """Every class in one tight cluster: no block split keeps each class in train and two in val, so
    the rows are stratified instead, and metrics say so."""
    frame = seasonal_table({1: 40, 2: 12, 3: 8}, seed=1)
    frame[["x", "y"]] = frame[["x", "y"]] / 50 + frame["label"].to_numpy()[:, None] * 1000.0  # one block a class
    train, val, info = training_data.carve_validation(samples.check(frame, "t"), 0.2, seed=0)
    assert "too few blocks" in info["method"], info
    assert set(train.frame["label"]) == {1, 2, 3} and len(set(val.frame["label"])) >= 2
