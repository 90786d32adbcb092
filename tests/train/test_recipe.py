"""The deep-model recipe on tables as real data has them: small, imbalanced, gappy, without val rows,
a single spectral index; the schedule counted in steps; class weighting as a recorded choice."""

import json

import numpy as np
import pandas as pd
import pytest

from lcflow.errors import LcflowError
from lcflow.labels import samples_table as samples
from lcflow.train import training
from lcflow.train.data import balance
from lcflow.train.loop.recipe import Schedule, TrainConfig, refit_steps
from lcflow.train.model_dirs.model_dir import TrainedModel
from lcflow.train.models.hyperparameters import check


def seasonal_table(n_per_class: dict[int, int], steps: int = 12, band: str = "NDVI", missing: float = 0.1,
                   seed: int = 0, noise: float = 0.08) -> pd.DataFrame:
    """Classes with their own seasonal curve in one index, noisy, with gaps; x/y on a 10 m grid in
    clusters (neighbours share a class, as field parcels do)."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps) / steps
    curves = {1: 0.2 + 0.6 * np.exp(-((t - 0.45) / 0.12) ** 2), 2: 0.7 + 0.1 * np.sin(2 * np.pi * t),
              3: 0.3 + 0.2 * (t > 0.5), 4: np.full(steps, 0.1), 5: 0.5 - 0.3 * np.exp(-((t - 0.6) / 0.1) ** 2)}
    rows = []
    for c, n in n_per_class.items():
        centre = rng.uniform(0, 5000, 2)
        for _ in range(n):
            x, y = centre + rng.normal(0, 60, 2)
            values = curves[c] + rng.normal(0, noise, steps) + rng.normal(0, 0.05)
            values[rng.random(steps) < missing] = np.nan
            rows.append([c, x, y, *values])
    frame = pd.DataFrame(rows, columns=["label", "x", "y"] + [f"{band}_t{k:02d}" for k in range(steps)])
    frame["label"] = frame["label"].astype(np.int32)
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)


def write(frame: pd.DataFrame, path) -> str:
    samples.write(frame, path, {"class_names": {"1": "crop", "2": "forest", "3": "grass", "4": "water", "5": "urban"}})
    return str(path)


FAST = {"min_steps": 300, "threads": 1, "hidden_size": 32, "evaluations": 15}
FAST_CNN = {"min_steps": 300, "threads": 1, "evaluations": 15, "filters": 16, "dense": 32}


def test_the_schedule_is_counted_in_steps_with_a_floor():
    cfg = TrainConfig.from_params(check("lstm", {"epochs": 40, "min_steps": 2000, "batch_size": 128}))
    tiny = Schedule.plan(cfg, 372, 1)  # the issue's table: 3 steps a pass
    assert tiny.steps_per_epoch == 3 and tiny.total_steps == 2000 and tiny.rounds == 40 and tiny.round_steps == 50
    large = Schedule.plan(cfg, 1_000_000, 8)  # 977 steps a pass over a million samples on 8 workers
    assert large.global_batch == 1024 and large.total_steps == 40 * 977 and large.round_steps == 977
    assert Schedule.plan(cfg, 372, 2).total_steps == 2000  # the floor holds at any world size
    assert tiny.warmup_steps == 100  # 5 % of the steps


def test_a_tiny_imbalanced_table_leaves_the_majority_rate_behind(tmp_path):
    """60 training rows at a batch of 128: 40 epochs would be 40 steps; the floor trains it."""
    train = seasonal_table({1: 40, 2: 12, 3: 8}, seed=1).assign(split="train")
    test = seasonal_table({1: 40, 2: 12, 3: 8}, seed=2).assign(split="test")
    path = write(pd.concat([train, test], ignore_index=True), tmp_path / "tiny.parquet")
    metrics = training.train("lstm", [path], tmp_path / "lstm", FAST)
    history = pd.read_csv(tmp_path / "lstm" / "history.csv")
    assert history["step"].iloc[0] == 20 and history["step"].max() <= 300  # rounds of 20 steps, early stop allowed
    majority = 40 / 60
    assert metrics["test"]["overall_accuracy"] > majority + 0.2, metrics["test"]
    assert metrics["val"]["source"] == "carved from train" and metrics["val"]["beats_majority"]
    # epochs alone (no floor) is what the old recipe did: far fewer steps, too few for an LSTM that pools its
    # outputs over time (the flattening default learns this toy in 40 steps, so the floor is shown on mean_last)
    pooled = {**FAST, "pooling": "mean_last"}
    floor = training.train("lstm", [path], tmp_path / "floor", pooled)
    few = training.train("lstm", [path], tmp_path / "few", {**pooled, "min_steps": 0, "epochs": 40})
    assert pd.read_csv(tmp_path / "few" / "history.csv")["step"].max() == 40
    assert few["test"]["overall_accuracy"] < floor["test"]["overall_accuracy"]
    assert floor["test"]["overall_accuracy"] > majority + 0.2


def test_class_weighting_is_a_recorded_choice(tmp_path):
    y = np.array([0] * 90 + [1] * 9 + [2] * 1)
    w = {how: balance.class_weights(y, 3, how) for how in ("none", "sqrt", "balanced")}
    np.testing.assert_allclose(w["none"], [1, 1, 1])
    np.testing.assert_allclose(w["balanced"], [100 / 270, 100 / 27, 100 / 3])
    np.testing.assert_allclose(w["sqrt"], np.sqrt(w["balanced"]))
    frame = pd.concat([seasonal_table({1: 150, 2: 20, 3: 10}, seed=4, noise=0.25).assign(split="train"),
                       seasonal_table({1: 150, 2: 20, 3: 10}, seed=5, noise=0.25).assign(split="test")])
    path = write(frame, tmp_path / "imb.parquet")
    recall = {}
    for how in ("none", "balanced"):
        m = training.train("tempcnn", [path], tmp_path / how, {**FAST_CNN, "class_weight": how})
        assert json.loads((tmp_path / how / "metrics.json").read_text())["params"]["class_weight"] == how
        recall[how] = m["test"]["per_class"]["3"]["recall"] + m["test"]["per_class"]["2"]["recall"]
        assert {"balanced_accuracy", "macro_f1", "overall_accuracy"} <= set(m["test"])
    assert recall["balanced"] >= recall["none"]  # the rare classes gain when weighted
    # the forest weights its classes by the square root of balanced unless told otherwise
    rf = training.train("rf", [path], tmp_path / "rf", {"n_estimators": 80})
    assert rf["params"]["class_weight"] == "sqrt"
    forest = TrainedModel.load(tmp_path / "rf").model.forest
    counts = frame[frame["split"] == "train"]["label"].value_counts().sort_index().to_numpy()
    # keyed by the class's index (classes in code order): weights on the wrong classes fail
    expected = dict(enumerate(np.sqrt(counts.sum() / (3 * counts))))
    assert sorted(forest.class_weight) == sorted(expected)
    np.testing.assert_allclose([forest.class_weight[k] for k in sorted(expected)], [expected[k] for k in sorted(expected)])
    assert counts[0] != counts[-1]  # unequal classes: weights in reverse order would differ
    plain = training.train("rf", [path], tmp_path / "rf_none", {"n_estimators": 80, "class_weight": "none"})
    assert plain["params"]["class_weight"] == "none"
    assert TrainedModel.load(tmp_path / "rf_none").model.forest.class_weight is None


def test_rows_mostly_missing_still_train(tmp_path):
    gappy = pd.concat([seasonal_table({1: 80, 2: 80, 3: 80}, missing=0.6, seed=6).assign(split="train"),
                       seasonal_table({1: 40, 2: 40, 3: 40}, missing=0.6, seed=7).assign(split="test")])
    bands = [c for c in gappy.columns if "_t" in c]
    gappy.loc[gappy.index[:5], bands] = np.nan  # a few rows without any observation
    path = write(gappy.reset_index(drop=True), tmp_path / "gappy.parquet")
    metrics = training.train("lstm", [path], tmp_path / "lstm", FAST)
    assert metrics["test"]["overall_accuracy"] > 0.7, metrics["test"]
    assert metrics["test"]["n_without_observation"] <= 5


def test_an_index_only_table_trains_and_predicts(tmp_path):
    frame = pd.concat([seasonal_table({1: 60, 2: 60, 3: 60, 5: 60}, steps=24, seed=8).assign(split="train"),
                       seasonal_table({1: 30, 2: 30, 3: 30, 5: 30}, steps=24, seed=9).assign(split="test")])
    path = write(frame, tmp_path / "ndvi.parquet")
    table = samples.read(path)
    assert table.bands == ["NDVI"] and table.steps == 24
    metrics = training.train("tempcnn", [path], tmp_path / "tempcnn", FAST_CNN)
    assert metrics["test"]["overall_accuracy"] > 0.8
    trained = TrainedModel.load(tmp_path / "tempcnn")
    assert trained.bands == ["NDVI"] and trained.steps == 24
    codes, _, _ = trained.predict(table.features())
    assert set(np.unique(codes)) <= {1, 2, 3, 5}
    mixed = frame.rename(columns={"NDVI_t00": "NDXI_t00"})
    with pytest.raises(Exception, match="unknown band.*NDXI"):
        samples.check(mixed, "m")


def test_on_real_slovenian_fields_the_deep_models_beat_the_majority_rate(tmp_path):
    """The eo-learn Slovenia patch (68 cloudy NDVI dates, real land use), as a user's field table: 500
    imbalanced rows, 7 % more cells missing, train/test in spatial blocks, no val rows."""
    from tests import real_tables

    frame, meta = real_tables.slovenia()
    assert len(frame) == 9945 and frame.filter(like="NDVI_t").shape[1] == 68
    assert 0.3 < frame.filter(like="NDVI_t").isna().to_numpy().mean() < 0.6  # clouds as gaps
    table = next(real_tables.spatial_folds(real_tables.field_like(frame, 500, seed=0), 5, 100.0))
    path = tmp_path / "slovenia.parquet"
    samples.write(table, path, meta)
    train, test = table[table["split"] == "train"], table[table["split"] == "test"]
    majority = float((test["label"] == train["label"].value_counts().idxmax()).mean())
    metrics = training.train("tempcnn", [str(path)], tmp_path / "tempcnn", FAST_CNN)
    assert metrics["val"]["source"] == "carved from train" and "spatial blocks" in metrics["val"]["method"]
    assert metrics["test"]["overall_accuracy"] > majority + 0.15, (metrics["test"], majority)  # 0.90 vs 0.66


def test_no_round_inside_the_warm_up_is_kept_as_the_best(tmp_path):
    """On a small val set an undertrained model can score best by chance: rounds that end while the
    rate still warms up are no candidates, and the run ends with weights from after the warm-up."""
    from lcflow.train.loop.selection import selectable

    plan = Schedule(total_steps=300, round_steps=20, warmup_steps=100, steps_per_epoch=3, global_batch=128)
    assert [selectable(s, plan.warmup_steps, plan.total_steps) for s in (20, 100, 120, 300)] == [False, False, True, True]
    assert selectable(40, 40, 40)  # all warm-up: the last round still counts
    frame = seasonal_table({1: 40, 2: 12, 3: 8}, seed=1).assign(split="train")
    path = write(frame, tmp_path / "t.parquet")
    training.train("tempcnn", [path], tmp_path / "m", {**FAST_CNN, "warmup_fraction": 0.5, "patience": 2})
    history = pd.read_csv(tmp_path / "m" / "history.csv")
    warm = history["step"] <= 150
    assert (history.loc[warm, "best_round"] == 0).all()
    assert history["best_round"].iloc[-1] > history.loc[warm, "round"].max()
    assert len(history) >= warm.sum() + 2  # patience counts from the end of the warm-up


@pytest.fixture(scope="module")
def augmented_case(tmp_path_factory):
    """A table with gaps and a TempCNN trained on it without augmentation, for the augmentations to differ from."""
    tmp = tmp_path_factory.mktemp("augmented")
    frame = pd.concat([seasonal_table({1: 80, 2: 40, 3: 30}, seed=10).assign(split="train"),
                       seasonal_table({1: 40, 2: 20, 3: 15}, seed=11).assign(split="test")])
    path = write(frame, tmp / "t.parquet")
    return path, tmp / "plain", training.train("tempcnn", [path], tmp / "plain", FAST_CNN)


def test_a_run_with_mixup_learns_repeats_and_records_it(augmented_case, tmp_path):
    path, plain_dir, plain = augmented_case
    runs = [training.train("tempcnn", [path], tmp_path / f"m{k}", {**FAST_CNN, "mixup": 0.4}) for k in range(2)]
    assert runs[0]["params"]["mixup"] == 0.4 and plain["params"]["mixup"] == 0.0
    assert runs[0]["test"]["overall_accuracy"] > 0.85, runs[0]["test"]  # majority: 0.53
    assert runs[0]["test"] == runs[1]["test"]  # seeded: the same blends, the same model
    losses = [pd.read_csv(d / "history.csv")["loss"].to_numpy() for d in (tmp_path / "m0", plain_dir)]
    # a blend's target is two classes in shares: its loss cannot fall to a clean sample's (0.55 vs 0.34 at
    # the end, measured); without the partners' part the loss would be a share of the clean one, lower
    assert losses[0][-5:].mean() > losses[1][-5:].mean() + 0.1, losses


def test_the_refit_takes_as_many_passes_as_the_selection_run_made_to_its_best_round():
    history = [{"round": 1, "step": 20, "best_round": 0}, {"round": 2, "step": 40, "best_round": 2},
               {"round": 3, "step": 60, "best_round": 2}]
    assert refit_steps(history, 80, 100) == (50, 2)  # 40 steps on 80 rows: 50 on 100
    assert refit_steps(history, 100, 100) == (40, 2)
    with pytest.raises(LcflowError, match="trained no round"):
        refit_steps([], 80, 100)
    cfg = TrainConfig.from_params(check("lstm", {}))
    refit = Schedule.plan(cfg, 372, 1, steps=400)  # its length given, not the floor of 1000
    assert (refit.total_steps, refit.rounds, refit.warmup_steps) == (400, 40, 20)


def test_a_refit_learns_from_the_val_rows_too_and_resumes_where_it_was_cut(tmp_path, monkeypatch, caplog):
    """The selection run is the plain run (same val scores, the same best round); the refit then trains
    the train and val rows together for the steps that round scaled to them, and ends with other weights.
    A job cut inside the refit resumes it from its own checkpoint and ends as an uncut one."""
    import logging

    import torch

    from lcflow.train.loop import run_checkpoint

    frame = pd.concat([seasonal_table({1: 80, 2: 40, 3: 30}, seed=10, noise=0.2).assign(split="train"),
                       seasonal_table({1: 40, 2: 20, 3: 15}, seed=11, noise=0.2).assign(split="test")])
    path = write(frame, tmp_path / "t.parquet")
    plain = training.train("tempcnn", [path], tmp_path / "plain", FAST_CNN)
    refit = training.train("tempcnn", [path], tmp_path / "refit", {**FAST_CNN, "refit": True})
    history = pd.read_csv(tmp_path / "refit" / "history.csv")
    untimed = [c for c in history.columns if c != "samples_per_s"]
    assert history[untimed].equals(pd.read_csv(tmp_path / "plain" / "history.csv")[untimed])  # the plain run
    # scored before the refit, which trains on these rows (after it, it scored 1.0 on them, measured)
    assert refit["val"] == plain["val"] and refit["val"]["overall_accuracy"] < 1
    best = int(history["best_round"].iloc[-1])
    n_all = refit["n_train"] + refit["val"]["n_samples"]
    selected_step = int(history.loc[history["round"] == best, "step"].iloc[0])
    assert refit["refit"]["selected_round"] == best and refit["refit"]["n_samples"] == n_all == 150
    assert refit["refit"]["steps"] == round(selected_step * n_all / refit["n_train"]) > selected_step
    assert refit["params"]["refit"] is True and "refit" not in plain
    weights = {d: torch.load(tmp_path / d / "model.pt", weights_only=True) for d in ("plain", "refit")}
    assert any(not torch.equal(weights["plain"][k], weights["refit"][k]) for k in weights["plain"])
    assert refit["test"]["overall_accuracy"] > 0.85, refit["test"]  # majority: 0.53
    assert sorted(p.name for p in (tmp_path / "refit").iterdir()) == ["history.csv", "metrics.json", "model.json",
                                                                     "model.pt"]  # no checkpoint left

    real_save, saved = run_checkpoint.save, []

    def cut_in_the_refit(where, *args):
        real_save(where, *args)
        saved.append(where.name)
        if where.name == training.REFIT_CHECKPOINT and saved.count(where.name) == 4:
            raise KeyboardInterrupt("the job's time is up")

    monkeypatch.setattr(run_checkpoint, "save", cut_in_the_refit)
    with pytest.raises(KeyboardInterrupt):
        training.train("tempcnn", [path], tmp_path / "cut", {**FAST_CNN, "refit": True})
    assert {training.CHECKPOINT, training.REFIT_CHECKPOINT} <= {p.name for p in (tmp_path / "cut").iterdir()}
    assert not (tmp_path / "cut" / "model.pt").exists()
    monkeypatch.setattr(run_checkpoint, "save", real_save)
    caplog.clear()  # the runs above, where an earlier test left the logger at INFO
    with caplog.at_level(logging.DEBUG, logger="lcflow.train"):
        resumed = training.train("tempcnn", [path], tmp_path / "cut", {**FAST_CNN, "refit": True})
    assert "holds this run ended" in caplog.text and "resumed from checkpoint" in caplog.text
    assert "round=1 rank=0" not in caplog.text and "round=5 rank=0" in caplog.text  # the refit went on at round 5
    again = torch.load(tmp_path / "cut" / "model.pt", weights_only=True)
    assert all(torch.equal(again[k], weights["refit"][k]) for k in again)
    assert resumed["test"] == refit["test"] and resumed["val"] == refit["val"]


def test_a_run_with_observation_dropout_learns_repeats_and_records_it(augmented_case, tmp_path):
    import torch

    path, plain_dir, plain = augmented_case
    given = {**FAST_CNN, "drop_observations": 0.5}
    runs = [training.train("tempcnn", [path], tmp_path / f"m{k}", given) for k in range(2)]
    assert runs[0]["params"]["drop_observations"] == 0.5 and plain["params"]["drop_observations"] == 0.0
    assert runs[0]["test"]["overall_accuracy"] > 0.85, runs[0]["test"]  # majority: 0.53
    weights = [torch.load(d / "model.pt", weights_only=True) for d in (tmp_path / "m0", tmp_path / "m1", plain_dir)]
    same = [all(torch.equal(w[k], weights[0][k]) for k in w) for w in weights[1:]]
    assert same == [True, False]  # seeded draws, and they changed the training


@pytest.mark.parametrize("name", ["lstm", "tempcnn", "ltae", "presto"])
def test_each_series_model_names_the_feature_that_flags_an_observed_step(name, tmp_path):
    """The feature observation dropout hides steps by is the observed flag of the model's own input (presto's
    input carries each row's position after it)."""
    from lcflow.common.features import Standardiser
    from lcflow.train.data.training_data import model_input
    from lcflow.train.models import model_class

    frame = seasonal_table({1: 10, 2: 10}, missing=0.3).assign(x=lambda f: f["x"] + 500000,
                                                                 y=lambda f: f["y"] + 5000000)
    samples.write(frame, tmp_path / "t.parquet", {"class_names": {"1": "crop", "2": "forest"}, "crs": "EPSG:32633"})
    table = samples.read([str(tmp_path / "t.parquet")])
    cls = model_class(name)
    model = cls({}, len(table.bands) + 1, table.steps, 2, table.bands, None, None)
    x = model_input(cls, table, Standardiser.fit(table.features()))
    observed = np.isfinite(table.features()).all(axis=2)
    assert 0.5 < observed.mean() < 0.9
    np.testing.assert_array_equal(x[:, :, model.observed_flag], observed)
