"""A forest as a deep model's teacher (``distill``): its probabilities for a row come from forests that never
saw the row's spatial block, the targets blend them with the label, and the network learns the targets."""

import logging
from functools import partial

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.ensemble import RandomForestClassifier

from lcflow.labels import samples_table as samples
from lcflow.train import training
from lcflow.train.data import forest_teacher
from lcflow.train.data.forest_teacher import ForestTeacher
from lcflow.train.loop import deep
from lcflow.train.models.hyperparameters import check
from lcflow.train.models.lstm import Network


def _rows(seed: int = 0, n: int = 240, gap: float = 0.8):
    """Three classes of (steps=6, features=4) series, ``gap`` apart (0.8: they overlap), in spatial blocks of
    10 rows."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = (rng.normal(size=(n, 6, 4)) + gap * y[:, None, None]).astype(np.float32)
    return x, y, np.repeat(np.arange(n // 10), 10)


def test_targets_are_the_label_blended_with_out_of_fold_probabilities():
    x, y, blocks = _rows()
    half = ForestTeacher(x, y, blocks, 3).targets(0.5, seed=0, n_jobs=1)
    full = ForestTeacher(x, y, blocks, 3).targets(1.0, seed=0, n_jobs=1)
    assert half.shape == (240, 3) and half.dtype == np.float32
    np.testing.assert_allclose(half.sum(1), 1, atol=1e-6)
    np.testing.assert_allclose(half, 0.5 * np.eye(3)[y] + 0.5 * full, atol=1e-6)
    # the forests' own view: not the labels copied back (they overlap), yet better than chance
    agree = (full.argmax(1) == y).mean()
    assert 0.5 < agree < 1.0 and (full.max(1) < 1).any()


def test_a_rows_probabilities_do_not_depend_on_its_blocks_labels():
    """Out-of-fold by spatial block: relabelling a whole block changes no probability inside it, only
    elsewhere (where forests trained on it); a forest that had seen the block would follow its labels."""
    x, y, blocks = _rows()
    before = ForestTeacher(x, y, blocks, 3).targets(1.0, seed=0, n_jobs=1)
    relabelled = y.copy()
    inside = blocks == 5
    relabelled[inside] = (y[inside] + 1) % 3
    after = ForestTeacher(x, relabelled, blocks, 3).targets(1.0, seed=0, n_jobs=1)
    np.testing.assert_array_equal(after[inside], before[inside])
    assert not np.array_equal(after[~inside], before[~inside])


def test_rows_without_positions_are_folded_in_a_seeded_order():
    x, y, _ = _rows()
    a = ForestTeacher(x, y, None, 3).targets(1.0, seed=3, n_jobs=1)
    np.testing.assert_array_equal(a, ForestTeacher(x, y, None, 3).targets(1.0, seed=3, n_jobs=1))
    assert 0.5 < (a.argmax(1) == y).mean() < 1.0


def test_a_teacher_fits_its_forests_once_a_seed_for_every_share(monkeypatch):
    x, y, blocks = _rows()
    fits = []
    fit = forest_teacher.out_of_fold_proba
    monkeypatch.setattr(forest_teacher, "out_of_fold_proba", lambda *a, **k: fits.append(a[3].seed) or fit(*a, **k))
    teacher = ForestTeacher(x, y, blocks, 3)
    shares = {share: teacher.targets(share, seed=0, n_jobs=1) for share in (0.3, 0.5, 1.0)}
    assert fits == [0]
    for share, targets in shares.items():  # each the blend at its share of the one fit's probabilities
        np.testing.assert_allclose(targets, (1 - share) * np.eye(3)[y] + share * shares[1.0], atol=1e-6)
    np.testing.assert_array_equal(shares[0.5], ForestTeacher(x, y, blocks, 3).targets(0.5, seed=0, n_jobs=1))
    other = teacher.targets(1.0, seed=1, n_jobs=1)  # another seed: other forests
    assert fits == [0, 0, 1] and not np.array_equal(other, shares[1.0])


class _Rank:
    """One of two ranks, in one process: its sum over ranks adds what the other rank found (``partner``),
    and it records what it contributed."""

    size = 2

    def __init__(self, rank: int, partner: np.ndarray | None = None):
        self.rank, self.partner, self.given = rank, partner, []

    def allreduce_sum(self, values: np.ndarray, name: str = "") -> np.ndarray:
        self.given.append((name, values.copy()))
        return values + (self.partner if self.partner is not None else 0)


def test_ranks_share_the_teachers_forests_out_and_sum_them_to_one_process_targets(monkeypatch, caplog):
    """Under two ranks each fits its own folds of the five (0, 2, 4 and 1, 3): their probabilities sum to
    one process's to the bit, as each row is held out by one fold, for two or three forests a rank."""
    x, y, blocks = _rows()
    alone = ForestTeacher(x, y, blocks, 3).targets(0.5, seed=0, n_jobs=1)
    fitted = []
    fit = forest_teacher.out_of_fold_proba
    monkeypatch.setattr(forest_teacher, "out_of_fold_proba", lambda *a, **k: fitted.append(list(k["only"])) or fit(*a, **k))
    second = _Rank(1)
    ForestTeacher(x, y, blocks, 3).targets(0.5, seed=0, n_jobs=1, comm=second)
    (name, partial_1), = second.given
    first = _Rank(0, partner=partial_1)
    with caplog.at_level(logging.INFO, logger="lcflow.train"):
        shared = ForestTeacher(x, y, blocks, 3).targets(0.5, seed=0, n_jobs=1, comm=first)
    assert fitted == [[1, 3], [0, 2, 4]] and first.given[0][0] == name == "lcflow.teacher.0.240"
    np.testing.assert_array_equal(shared, alone)
    partial_0 = first.given[0][1]
    held_by_1 = partial_1.sum(1) > 0  # the rows folds 1 and 3 hold out: rank 1's alone
    assert 0 < held_by_1.mean() < 1 and not partial_0[held_by_1].any() and (partial_0[~held_by_1].sum(1) > 0).all()
    assert "rank 0 of 2 fits the teacher's folds [0, 2, 4] of 5" in caplog.text


def test_rows_in_one_block_train_on_their_labels(caplog):
    x, y, _ = _rows(n=40)
    with caplog.at_level(logging.WARNING, logger="lcflow.train"):
        targets = ForestTeacher(x, y, np.zeros(40, dtype=int), 3).targets(0.7, seed=0, n_jobs=1)
    np.testing.assert_array_equal(targets, np.eye(3, dtype=np.float32)[y])
    assert "one spatial block" in caplog.text


LSTM = partial(Network, 4, 3, 8, 1, False, 0.0)
PARAMS = {"epochs": 6, "min_steps": 0, "evaluations": 3, "batch_size": 32, "threads": 1, "patience": 100,
          "input_noise": 0, "class_weight": "none", "label_smoothing": 0.1}


def _fit(x, y, targets, **extra):
    torch.manual_seed(0)
    net = LSTM()
    cfg = deep.TrainConfig.from_params(check("lstm", {**PARAMS, **extra}))
    deep.fit(net, deep.Samples(x, y, 3, targets=targets), cfg)
    return net


def test_one_hot_targets_train_as_the_labels_do():
    x, y, _ = _rows()
    by_label, by_targets = _fit(x, y, None), _fit(x, y, np.eye(3, dtype=np.float32)[y])
    for a, b in zip(by_label.state_dict().values(), by_targets.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mixup", [0.0, 0.4])
def test_the_network_learns_the_targets_not_the_labels(mixup):
    """Targets that name the next class of every row: the network follows them, with or without mixup."""
    x, y, _ = _rows(gap=3.0)
    shifted = np.eye(3, dtype=np.float32)[(y + 1) % 3]
    net = _fit(x, y, shifted, epochs=30, mixup=mixup)
    with torch.no_grad():
        predicted = net(torch.from_numpy(x)).argmax(1).numpy()
    assert (predicted == (y + 1) % 3).mean() > 0.8 and (predicted == y).mean() < 0.15


@pytest.fixture(scope="module")
def placed_table(tmp_path_factory):
    """Three classes of two-band series at positions x/y (10 m pixels), split train/test."""
    rng = np.random.default_rng(0)
    n, steps = 400, 6
    label = rng.choice([11, 21, 31], n)
    level = {11: 0.2, 21: 0.35, 31: 0.5}
    cols = {"label": label, "x": 500000 + 10 * rng.integers(0, 300, n), "y": 5000000 + 10 * rng.integers(0, 300, n),
            "split": rng.choice(["train", "test"], n, p=[0.8, 0.2])}
    for k in range(steps):
        base = np.array([level[c] for c in label]) + rng.normal(0, 0.12, n)
        cols[f"B04_t{k:02d}"] = 1000 * (0.5 - base)
        cols[f"B08_t{k:02d}"] = 1000 * base
    path = tmp_path_factory.mktemp("placed") / "placed.parquet"
    samples.write(pd.DataFrame(cols), path, {"class_names": {"11": "a", "21": "b", "31": "c"}})
    return path


def test_a_distilled_model_trains_refits_and_records_its_share(placed_table, tmp_path, caplog):
    given = {"epochs": 4, "min_steps": 0, "hidden_size": 8, "threads": 1, "distill": 0.5, "refit": True}
    with caplog.at_level(logging.INFO, logger="lcflow.train"):
        metrics = training.train("lstm", [str(placed_table)], tmp_path / "m", given)
    assert metrics["params"]["distill"] == 0.5 and metrics["refit"]["n_samples"] == metrics["n_train"] + \
        metrics["n_val"]
    taught = [r.getMessage() for r in caplog.records if r.getMessage().startswith("distill: a forest's")]
    # the selection run's training rows, then the refit's train and val rows
    assert [f"of the {metrics['n_train']} training labels" in taught[0],
            f"of the {metrics['n_train'] + metrics['n_val']} training labels" in taught[1]] == [True, True]
    assert "folds by spatial block" in taught[0]
    assert metrics["test"]["overall_accuracy"] > 0.5


class _Recorded(RandomForestClassifier):
    """RandomForestClassifier, recording every forest fitted and the rows it saw."""

    fitted: list = []

    def fit(self, x, y, **kw):
        _Recorded.fitted.append((self, len(x)))
        return super().fit(x, y, **kw)


def test_a_teachers_trees_grow_on_at_most_its_row_cap_and_each_fold_is_logged(monkeypatch, caplog):
    """On a large table each tree grows on TEACHER_TREE_ROWS rows drawn from its fold's (its root weighs
    that many), which bounds a fold's time and memory; a table under the cap keeps every tree on a
    bootstrap of all its fold's rows, to the bit what the teacher gave without a cap. Each fold is logged
    with the time left."""
    from lcflow.labels import cleaning

    x, y, blocks = _rows()
    monkeypatch.setattr(cleaning, "RandomForestClassifier", _Recorded)
    monkeypatch.setattr(forest_teacher, "TEACHER_TREES", 20)
    _Recorded.fitted = []
    with caplog.at_level(logging.INFO, logger="lcflow.labels.cleaning"):
        uncapped = ForestTeacher(x, y, blocks, 3).targets(1.0, seed=0, n_jobs=1)
    grown = [(f, n) for f, n in _Recorded.fitted]
    assert len(grown) == 5 and all(f.max_samples is None for f, _ in grown)
    assert all(e.tree_.weighted_n_node_samples[0] == n for f, n in grown for e in f.estimators_)
    plain = cleaning.out_of_fold_proba(x.reshape(240, -1), y, blocks, cleaning.JudgingForests(5, 20, 0), 1)[0]
    np.testing.assert_array_equal(uncapped, plain.astype(np.float32))
    folds = [m for m in caplog.messages if m.startswith("distill: the teacher: fold")]
    assert [m.split(":")[2].split(")")[0] for m in folds] == [f" fold {k} ({k + 1} of 5 here" for k in range(5)]
    assert all("20 trees on" in m and "each on a bootstrap of them" in m for m in folds)
    assert folds[-1].endswith(" 0 s left")

    monkeypatch.setattr(forest_teacher, "TEACHER_TREE_ROWS", 60)
    _Recorded.fitted = []
    capped = ForestTeacher(x, y, blocks, 3).targets(1.0, seed=0, n_jobs=1)
    assert [n for _, n in _Recorded.fitted] == [n for _, n in grown] and all(n > 60 for _, n in grown)
    assert all(e.tree_.weighted_n_node_samples[0] == 60 for f, _ in _Recorded.fitted for e in f.estimators_)
    assert not np.array_equal(capped, uncapped) and 0.5 < (capped.argmax(1) == y).mean() < 1.0
