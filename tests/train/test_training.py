import json

import numpy as np
import pandas as pd
import pytest

from lcflow.cli import main
from lcflow.errors import LcflowError
from lcflow.labels import samples_table as samples
from lcflow.train import training
from lcflow.train.loop import deep
from lcflow.train.model_dirs import saved_models
from lcflow.train.model_dirs.model_dir import TrainedModel
from lcflow.train.models import hyperparameters

FAST = {"rf": {"n_estimators": 50}, "lstm": {"epochs": 8, "min_steps": 0, "hidden_size": 32},
        "tempcnn": {"epochs": 8, "min_steps": 0, "filters": 16, "dense": 32}}


@pytest.fixture(scope="module")
def toy_table(tmp_path_factory):
    """Three classes with different seasonal curves in two bands, noisy, with gaps, split train/val/test."""
    rng = np.random.default_rng(0)
    n, steps = 600, 8
    label = np.repeat([11, 21, 31], n // 3)
    t = np.arange(steps)
    curves = {11: np.full(steps, 0.2), 21: 0.2 + 0.5 * np.exp(-0.5 * ((t - 3) / 1.0) ** 2), 31: 0.3 + 0.3 * (t > 4)}
    cols = {"label": label, "split": rng.choice(["train", "val", "test"], n, p=[0.6, 0.2, 0.2])}
    for k in range(steps):
        base = np.array([curves[c][k] for c in label])
        cols[f"B04_t{k:02d}"] = 1000 * (0.3 - 0.5 * base + rng.normal(0, 0.03, n))
        cols[f"B08_t{k:02d}"] = 1000 * (base + rng.normal(0, 0.03, n))
    df = pd.DataFrame(cols)
    gaps = rng.random((n, steps)) < 0.15
    for k in range(steps):
        df.loc[gaps[:, k], [f"B04_t{k:02d}", f"B08_t{k:02d}"]] = np.nan
    path = tmp_path_factory.mktemp("toy") / "toy.parquet"
    samples.write(df, path, {"class_names": {"11": "urban", "21": "arable", "31": "forest"}})
    return path


@pytest.mark.parametrize("model", ["rf", "lstm", "tempcnn"])
def test_train_evaluate_and_reload(model, toy_table, tmp_path):
    out = tmp_path / model
    metrics = training.train(model, [str(toy_table)], out, FAST[model])
    assert {"model.json", "metrics.json", "history.csv"} <= {p.name for p in out.iterdir()}
    majority = 1 / 3
    assert metrics["test"]["overall_accuracy"] > majority + 0.5
    history = pd.read_csv(out / "history.csv")
    assert len(history) >= 1 and "val_accuracy" in history
    result = saved_models.evaluate(out, [str(toy_table)], tmp_path / "m.json")
    written = json.loads((tmp_path / "m.json").read_text())
    assert written["overall_accuracy"] == result["overall_accuracy"] == metrics["test"]["overall_accuracy"]
    assert {"overall_accuracy", "kappa", "macro_f1", "per_class", "confusion_matrix"} <= set(written)
    assert written["per_class"]["21"]["name"] == "arable"
    trained = TrainedModel.load(out)
    table = samples.read(toy_table)
    codes_a, conf_a, _ = trained.predict(table.features())
    codes_b, conf_b, _ = TrainedModel.load(out).predict(table.features())
    assert np.array_equal(codes_a, codes_b) and np.allclose(conf_a, conf_b)
    assert set(np.unique(codes_a)) <= {11, 21, 31} and ((conf_a > 0) & (conf_a <= 1)).all()
    # the probabilities models are averaged by: one per class in the order of classes, the codes' own
    proba, empty = trained.probabilities(table.features())
    assert proba.shape == (len(codes_a), len(trained.classes)) and np.allclose(proba.sum(axis=1), 1, atol=1e-5)
    assert np.array_equal(np.asarray(trained.classes)[proba.argmax(axis=1)], codes_a)
    assert np.allclose(proba.max(axis=1), conf_a) and not empty.any()


def test_a_forest_records_the_memory_its_trees_hold(toy_table, tmp_path, caplog):
    """metrics.json says what a map job will hold: the nodes of the saved trees, and the megabytes of the
    node records and class rows each tree hands to pickle (its state), counted here from those arrays."""
    caplog.set_level("INFO", logger="lcflow.train")
    training.train("rf", [str(toy_table)], tmp_path / "rf", FAST["rf"] | {"min_samples_leaf": 3})
    size = json.loads((tmp_path / "rf" / "metrics.json").read_text())["size"]
    forest = TrainedModel.load(tmp_path / "rf").model.forest
    assert size["trees"] == 50 and size["nodes"] == sum(e.tree_.node_count for e in forest.estimators_)
    assert size["mean_depth"] == np.mean([e.tree_.max_depth for e in forest.estimators_])
    states = [e.tree_.__getstate__() for e in forest.estimators_]
    assert size["held_mb"] == pytest.approx(sum(t["nodes"].nbytes + t["values"].nbytes for t in states) / 1e6)
    assert f"{size['nodes']} nodes" in caplog.text and "MB held in memory" in caplog.text


def test_lstm_runs_repeat(toy_table, tmp_path):
    a = training.train("lstm", [str(toy_table)], tmp_path / "a", {"epochs": 3, "min_steps": 0, "hidden_size": 16})
    b = training.train("lstm", [str(toy_table)], tmp_path / "b", {"epochs": 3, "min_steps": 0, "hidden_size": 16})
    assert a["test"]["overall_accuracy"] == b["test"]["overall_accuracy"]


def test_a_training_checks_its_parameters_once_and_takes_each_default_from_one_table(toy_table, tmp_path,
                                                                                     monkeypatch):
    """model_params.lstm.batch_size and the rest: checked once a training (the model takes the checked set as
    it is), their defaults filled in by that check alone (TrainConfig reads every one as given)."""
    checks, real = [], hyperparameters.check
    monkeypatch.setattr(hyperparameters, "check", lambda model, given, where=None: checks.append(model) or
                        real(model, given, where))
    metrics = training.train("lstm", [str(toy_table)], tmp_path / "m", {"epochs": 2, "min_steps": 0, "hidden_size": 8})
    assert checks == ["lstm"]
    assert metrics["global_batch"] == hyperparameters.TRAINING["batch_size"].default
    checked = real("lstm", {"batch_size": 64})
    assert deep.TrainConfig.from_params(checked).batch_size == 64
    resnet = real("resnet", {})  # patches have no observed steps to drop: the recipe's value, off
    assert "drop_observations" not in resnet
    assert deep.TrainConfig.from_params(resnet).drop_observations == hyperparameters.TRAINING["drop_observations"].default == 0
    with pytest.raises(KeyError, match="batch_size"):  # no second default: a set that skipped the check fails
        deep.TrainConfig.from_params({k: v for k, v in checked.items() if k != "batch_size"})
    with pytest.raises(hyperparameters.ParamError, match=r"model lstm\.batch_size = 0"):  # a raw dict is checked
        training.model_class("lstm")({"batch_size": 0}, 3, 8, 3)


def test_lstm_attention_pooling_trains_and_weighs_the_steps(toy_table, tmp_path):
    """pooling=attention: a weighted sum of the LSTM's outputs, the weights a softmax over the steps; it learns
    the toy classes, reloads to the same predictions, and with a flat score it is the plain mean."""
    import torch

    from lcflow.train.models.lstm import Network

    out = tmp_path / "lstm"
    metrics = training.train("lstm", [str(toy_table)], out, FAST["lstm"] | {"pooling": "attention"})
    assert metrics["test"]["overall_accuracy"] > 1 / 3 + 0.5
    trained = TrainedModel.load(out)
    assert trained.model.params["pooling"] == "attention" and trained.model.net.score is not None
    features = samples.read(toy_table).features()
    assert np.array_equal(trained.predict(features)[0], TrainedModel.load(out).predict(features)[0])

    net = Network(n_features=3, n_classes=4, hidden_size=8, num_layers=1, bidirectional=True, dropout=0.0,
                  pooling="attention").eval()
    x = torch.randn(5, 7, 3)
    lstm_out, _ = net.lstm(x)
    weights = torch.softmax(net.score(lstm_out), dim=1)
    assert weights.shape == (5, 7, 1) and torch.allclose(weights.sum(dim=1), torch.ones(5, 1))
    assert not torch.allclose(weights, torch.full_like(weights, 1 / 7))  # each series weighs its own steps
    assert torch.allclose(net(x), net.head((weights * lstm_out).sum(dim=1)), atol=1e-6)
    torch.nn.init.zeros_(net.score[2].weight)  # every step scored alike: the plain mean over time
    assert torch.allclose(net(x), net.head(lstm_out.mean(dim=1)), atol=1e-6)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_lstm_final_pooling_takes_each_directions_state_after_the_whole_series(bidirectional):
    """pooling=final: the top layer's final states (PyTorch's h_n), which are the forward direction's output at
    the last step and the backward one's at the first; mean_final adds the mean over time."""
    import torch

    from lcflow.train.models.lstm import Network

    x = torch.randn(5, 7, 3)
    for pooling in ("final", "mean_final"):
        torch.manual_seed(0)
        net = Network(n_features=3, n_classes=4, hidden_size=8, num_layers=2, bidirectional=bidirectional,
                      dropout=0.0, pooling=pooling).eval()
        out, _ = net.lstm(x)
        top = torch.cat([out[:, -1, :8], out[:, 0, 8:]], dim=1)  # 8 units a direction
        pooled = top if pooling == "final" else out.mean(dim=1) + top
        assert torch.allclose(net(x), net.head(pooled), atol=1e-6)
        if bidirectional:  # the backward state at the last step has read one step only: not the same
            assert not torch.allclose(top, out[:, -1], atol=1e-3)


def test_lstm_flatten_pooling_keeps_each_steps_output_in_its_place(toy_table, tmp_path):
    """pooling=flatten: the classifier reads every step's output side by side (steps x width inputs), so
    swapping two steps' outputs changes its answer where a mean would not; it trains on the toy table and
    reloads to the same predictions."""
    import torch

    from lcflow.train.models.lstm import Network

    torch.manual_seed(0)
    net = Network(n_features=3, n_classes=4, hidden_size=8, num_layers=1, bidirectional=True, dropout=0.0,
                  pooling="flatten", steps=7).eval()
    assert net.head[2].in_features == 7 * 16
    x = torch.randn(5, 7, 3)
    out, _ = net.lstm(x)
    assert torch.allclose(net(x), net.head(out.reshape(5, -1)), atol=1e-6)
    swapped = out[:, [1, 0, 2, 3, 4, 5, 6]]
    assert not torch.allclose(net.head(swapped.reshape(5, -1)), net(x), atol=1e-4)
    with pytest.raises(ValueError, match="time steps"):
        Network(3, 4, 8, 1, True, 0.0, pooling="flatten")

    model_dir = tmp_path / "lstm"
    metrics = training.train("lstm", [str(toy_table)], model_dir, FAST["lstm"] | {"pooling": "flatten"})
    assert metrics["test"]["overall_accuracy"] > 1 / 3 + 0.5
    trained = TrainedModel.load(model_dir)
    steps = samples.read(toy_table).steps
    assert trained.model.net.head[2].in_features == steps * 2 * trained.model.params["hidden_size"]
    features = samples.read(toy_table).features()
    assert np.array_equal(trained.predict(features)[0], TrainedModel.load(model_dir).predict(features)[0])


def test_an_lstm_described_before_pooling_existed_loads_as_it_was_built(toy_table, tmp_path):
    """A model directory whose description has no ``pooling`` (written before the parameter existed, when the
    LSTM pooled mean plus last) loads as mean_last, not as today's default, and predicts as before."""
    import json

    from lcflow.train.model_dirs.model_dir import META_FILE

    model_dir = tmp_path / "lstm"
    training.train("lstm", [str(toy_table)], model_dir, FAST["lstm"] | {"pooling": "mean_last"})
    features = samples.read(toy_table).features()
    before = TrainedModel.load(model_dir).predict(features)[0]
    meta = json.loads((model_dir / META_FILE).read_text())
    del meta["params"]["pooling"]
    (model_dir / META_FILE).write_text(json.dumps(meta))
    trained = TrainedModel.load(model_dir)
    assert trained.model.params["pooling"] == "mean_last"
    assert np.array_equal(trained.predict(features)[0], before)


def test_table_without_split_trains_on_everything(toy_table, tmp_path):
    df = pd.read_parquet(toy_table).drop(columns=["split"])
    path = tmp_path / "nosplit.parquet"
    df.to_parquet(path)
    metrics = training.train("rf", [str(path)], tmp_path / "rf", FAST["rf"])
    assert metrics["n_train"] == len(df) and "test" not in metrics
    assert saved_models.evaluate(tmp_path / "rf", [str(path)], tmp_path / "m.json")["n_samples"] == len(df)


def test_training_errors(toy_table, tmp_path):
    with pytest.raises(LcflowError, match="unknown model 'svm'"):
        training.train("svm", [str(toy_table)], tmp_path / "x")
    with pytest.raises(LcflowError, match="unknown parameter.*'trees'"):
        training.train("rf", [str(toy_table)], tmp_path / "x", {"trees": 5})
    with pytest.raises(LcflowError, match="expected key=value"):
        hyperparameters.parse_overrides(["epochs"])
    assert hyperparameters.parse_overrides(["epochs=3", "dropout=0.1", "bidirectional=false", "max_depth=null"]) == \
        {"epochs": 3, "dropout": 0.1, "bidirectional": False, "max_depth": None}
    with pytest.raises(LcflowError, match="not a trained model directory"):
        saved_models.evaluate(tmp_path, [str(toy_table)], tmp_path / "m.json")


def test_evaluate_refuses_table_without_model_bands(toy_table, tmp_path):
    training.train("rf", [str(toy_table)], tmp_path / "rf", FAST["rf"])
    df = pd.read_parquet(toy_table).drop(columns=[f"B08_t{k:02d}" for k in range(8)])
    path = tmp_path / "b04.parquet"
    df.to_parquet(path)
    with pytest.raises(LcflowError, match="lacks what the model needs: bands \\['B08'\\]"):
        saved_models.evaluate(tmp_path / "rf", [str(path)], tmp_path / "m.json")
    assert not (tmp_path / "m.json").exists()


def test_cli_reports_bad_tables_in_one_line(toy_table, tmp_path, capsys):
    df = pd.read_parquet(toy_table)
    cases = {
        "nolabel.parquet": (df.drop(columns=["label"]), "no 'label' column"),
        "oneclass.parquet": (df.assign(label=21), "only 1 class"),
        "missing.parquet": (df.drop(columns=["B04_t03"]), "missing band column(s) B04_t03"),
    }
    for name, (frame, message) in cases.items():
        frame.to_parquet(tmp_path / name)
        code = main(["train", "--model", "rf", "--samples", str(tmp_path / name), "--out", str(tmp_path / "m")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1
        assert name in err[0] and message in err[0]
    assert not (tmp_path / "m").exists()


def test_weight_correction_reads_the_same_training_by_the_posterior(toy_table, tmp_path):
    """``weight_correction`` changes how a network's probabilities are read, not what it learns: a run at 1
    trains the weights a run at 0 trains, records the loss's class weights in model.json, and its
    probabilities (test scores, a reloaded model, a window's classes-first array) are the run at 0's divided
    by those weights and renormalised. A description without the weights cannot be read so."""
    df = pd.read_parquet(toy_table)
    rare = (df["label"] == 11) & (np.arange(len(df)) % 6 != 0)  # class 11 a sixth of the others
    path = tmp_path / "unequal.parquet"
    samples.write(df[~rare].reset_index(drop=True), path, samples.read(toy_table).meta)
    params = FAST["tempcnn"] | {"class_weight": "balanced"}
    training.train("tempcnn", [str(path)], tmp_path / "as_trained", params)
    metrics = training.train("tempcnn", [str(path)], tmp_path / "corrected", params | {"weight_correction": 1.0})
    meta = {d: json.loads((tmp_path / d / "model.json").read_text()) for d in ("as_trained", "corrected")}
    plain, fixed = TrainedModel.load(tmp_path / "as_trained"), TrainedModel.load(tmp_path / "corrected")
    assert deep.state_checksum(fixed.model.net) == deep.state_checksum(plain.model.net)
    train = samples.read(path).split("train").frame["label"].value_counts().sort_index()
    expected = train.sum() / (3 * train.to_numpy())  # scikit-learn's "balanced"
    np.testing.assert_allclose(meta["corrected"]["loss_class_weights"], expected, rtol=1e-9)
    assert expected[0] > 1 > expected[1]

    table = samples.read(path)
    before, after = plain.probabilities(table.features())[0], fixed.probabilities(table.features())[0]
    divided = before / expected
    np.testing.assert_allclose(after, divided / divided.sum(1, keepdims=True), atol=1e-6)
    assert after[:, 0].mean() < before[:, 0].mean()  # the class the weights lifted is read down
    test = table.split("test")
    codes = np.asarray(fixed.classes)[fixed.probabilities(test.features())[0].argmax(1)]
    assert metrics["test"]["overall_accuracy"] == pytest.approx((codes == test.frame["label"].to_numpy()).mean())
    window = np.moveaxis(before[:6].reshape(2, 3, 3), 2, 0)  # (classes, rows, cols), as a patch model's map
    np.testing.assert_allclose(np.moveaxis(fixed.model.corrected(window, axis=0), 0, 2).reshape(6, 3),
                               after[:6], atol=1e-6)
    # another exponent divides the weights out to its power (at 1, w ** tau == w hides a dropped exponent)
    fixed.model.params["weight_correction"] = 0.5
    half = before / np.sqrt(expected)
    half /= half.sum(1, keepdims=True)
    np.testing.assert_allclose(fixed.probabilities(table.features())[0], half, atol=1e-6)
    assert np.abs(half - after).max() > 1e-2 and np.abs(half - before).max() > 1e-2

    del meta["corrected"]["loss_class_weights"]
    (tmp_path / "corrected" / "model.json").write_text(json.dumps(meta["corrected"]))
    with pytest.raises(LcflowError, match="weight_correction 1 needs the class weights .* retrain"):
        TrainedModel.load(tmp_path / "corrected").probabilities(table.features())
