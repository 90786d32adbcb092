"""The training loop (lcflow.train.loop.deep.fit): a checkpoint is resumed only by the run that wrote it (same
samples and parameters, its fingerprint, and the same number of workers; any other valid checkpoint is
ignored and training starts afresh), mixed precision on the CPU, a weights average kept and resumed, and
the round kept chosen by the chosen measure."""

import logging
from functools import partial

import numpy as np
import pytest
import torch

from lcflow.train.loop import deep, run_checkpoint
from lcflow.train.models.hyperparameters import check
from lcflow.train.models.lstm import Network
from lcflow.train.models.tempcnn import Network as TempCNN

PARAMS = {"epochs": 4, "min_steps": 0, "evaluations": 4, "batch_size": 32, "threads": 1, "patience": 100,
          "input_noise": 0, "class_weight": "none"}


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, 300)
    x = (rng.normal(size=(300, 6, 4)) + y[:, None, None]).astype(np.float32)
    return x[:240], y[:240], x[240:], y[240:]


#: the networks the tests train: a small LSTM, and a small TempCNN (4 features, 6 steps, 3 classes)
LSTM = partial(Network, 4, 3, 8, 1, False, 0.0)
TEMPCNN = partial(TempCNN, 4, 6, 3, 8, 3, 16, 0.0)


def _noise():
    """_data's series with labels drawn independently of them: validation accuracy wanders, so runs stop early."""
    x, y, x_val, y_val = _data()
    rng = np.random.default_rng(1)
    return x, rng.permutation(y), x_val, rng.permutation(y_val)


def _samples(x, y, x_val, y_val) -> deep.Samples:
    return deep.Samples(x, y, 3, x_val, y_val)


def _kept(path, fingerprint: str) -> run_checkpoint.Checkpoint | None:
    return None if path is None else run_checkpoint.Checkpoint(path, fingerprint)


def _fit(checkpoint, fingerprint: str, network=LSTM, data=_data, **extra):
    torch.manual_seed(0)
    net = network()
    cfg = deep.TrainConfig.from_params(check("lstm", {**PARAMS, **extra}))
    history = deep.fit(net, _samples(*data()), cfg, checkpoint=_kept(checkpoint, fingerprint))
    return net, history


def _weights(net) -> list[torch.Tensor]:
    return [t.clone() for t in net.state_dict().values()]


@pytest.fixture
def finished(tmp_path):
    """A run of fingerprint 'run-a' that left its checkpoint after its last round."""
    checkpoint = tmp_path / "checkpoint.pt"
    net, history = _fit(checkpoint, "run-a")
    assert checkpoint.exists() and torch.load(checkpoint, weights_only=True)["progress"]["round"] == len(history) == 4
    return checkpoint, _weights(net)


def test_the_run_that_wrote_a_checkpoint_resumes_from_it(finished, caplog):
    checkpoint, weights = finished
    with caplog.at_level(logging.DEBUG, logger="lcflow.train"):
        net, history = _fit(checkpoint, "run-a")
    assert f"checkpoint {checkpoint} holds this run ended after round 4" in caplog.text
    assert "round=" not in caplog.text  # nothing left to train
    assert len(history) == 4 and all(torch.equal(a, b) for a, b in zip(_weights(net), weights))


def test_an_early_stopped_run_is_taken_as_it_ended_and_a_pruned_one_goes_on(tmp_path, caplog):
    """An early stop ends a run: started again from its checkpoint, the run trains nothing and ends with the
    weights of its best round (a study's best trial becomes the final model so). A pruned run was cut
    short, not ended: started again, it trains its remaining rounds."""
    checkpoint = tmp_path / "stopped.pt"
    stop = {"patience": 1, "evaluations": 12, "epochs": 12}
    net, history = _fit(checkpoint, "run-a", data=_noise, **stop)
    assert len(history) < 12  # stopped early, after its first round without a better one
    saved = torch.load(checkpoint, weights_only=True)["progress"]
    assert saved["finished"] and saved["round"] == len(history) and saved["best_round"] < len(history)
    status = {}
    torch.manual_seed(0)
    again = LSTM()
    caplog.clear()  # the first run's lines, where an earlier test left the logger at INFO
    with caplog.at_level(logging.DEBUG, logger="lcflow.train"):
        rerun = deep.fit(again, _samples(*_noise()), deep.TrainConfig.from_params(check("lstm", {**PARAMS, **stop})),
                         checkpoint=_kept(checkpoint, "run-a"), status=status)
    assert f"holds this run ended after round {len(history)}" in caplog.text and "round=" not in caplog.text
    assert status["resumed_round"] == len(history) and status["finished_before"] and rerun == history
    assert status["seconds"] > 0  # the rounds the first job trained
    assert all(torch.equal(a, b) for a, b in zip(_weights(again), _weights(net)))

    pruned = tmp_path / "pruned.pt"
    cfg = deep.TrainConfig.from_params(check("lstm", PARAMS))
    torch.manual_seed(0)
    deep.fit(LSTM(), _samples(*_data()), cfg, checkpoint=_kept(pruned, "run-p"), on_round=lambda row: row["round"] == 2)
    assert not torch.load(pruned, weights_only=True)["progress"].get("finished")
    status = {}
    torch.manual_seed(0)
    went_on = deep.fit(LSTM(), _samples(*_data()), cfg, checkpoint=_kept(pruned, "run-p"), status=status)
    assert status["resumed_round"] == 2 and not status["finished_before"]
    assert [r["round"] for r in went_on] == [1, 2, 3, 4]


@pytest.mark.parametrize("change", ["another fingerprint", "another world size"])
def test_a_valid_checkpoint_of_another_run_is_ignored(finished, tmp_path, caplog, change):
    """Other samples or parameters (fingerprint), or another number of workers: the checkpoint is read
    safely, named in the log as another run's, and the run trains every round from the start, ending
    where a run without any checkpoint ends."""
    checkpoint, _ = finished
    fingerprint = "run-b" if change == "another fingerprint" else "run-a"
    if change == "another world size":
        state = torch.load(checkpoint, weights_only=True)
        state["world_size"] = 2
        torch.save(state, checkpoint)
    fresh, fresh_history = _fit(None, fingerprint)
    with caplog.at_level(logging.DEBUG, logger="lcflow.train"):
        net, history = _fit(checkpoint, fingerprint)
    assert f"checkpoint {checkpoint} is of another run" in caplog.text and "resumed" not in caplog.text
    assert [r["round"] for r in history] == [1, 2, 3, 4] and "round=1 rank=0" in caplog.text
    assert all(torch.equal(a, b) for a, b in zip(_weights(net), _weights(fresh)))
    assert [r["loss"] for r in history] == [r["loss"] for r in fresh_history]
    # and the checkpoint is now this run's
    assert torch.load(checkpoint, weights_only=True)["fingerprint"] == fingerprint


def test_amp_trains_in_bfloat16_on_the_cpu_too(monkeypatch):
    """amp: the training steps run under bfloat16 autocast (the convolutions' and the head's outputs are
    bf16), the weights stay fp32, and the run lands near the fp32 one, not on it. TempCNN: convolutions run
    in bfloat16 on any x86 CPU, with or without native bfloat16."""
    seen = []
    real = TempCNN.forward

    def recording(self, x):
        out = real(self, x)
        if self.training:
            seen.append(out.dtype)
        return out

    monkeypatch.setattr(TempCNN, "forward", recording)
    full, full_history = _fit(None, "fp32", network=TEMPCNN)
    assert set(seen) == {torch.float32}
    seen.clear()
    half, half_history = _fit(None, "bf16", network=TEMPCNN, amp=True)
    assert set(seen) == {torch.bfloat16}
    assert all(t.dtype == torch.float32 for t in half.state_dict().values() if t.is_floating_point())
    assert not all(torch.equal(a, b) for a, b in zip(_weights(half), _weights(full)))
    assert abs(half_history[-1]["val_accuracy"] - full_history[-1]["val_accuracy"]) <= 0.05
    assert np.isfinite([r["loss"] for r in half_history]).all()


def test_amp_trains_in_float32_where_the_cpu_cannot_run_the_network_in_bfloat16(monkeypatch, caplog):
    """On a CPU without native bfloat16 oneDNN has no bfloat16 LSTM ("could not create a primitive
    descriptor"): amp then trains in float32, says so, and the probe leaves no trace (the same weights as a
    run without amp). The failure is raised here whatever the CPU, so the test holds on any machine."""
    real = Network.forward

    def without_bfloat16(self, x):
        if torch.is_autocast_enabled("cpu"):
            raise RuntimeError("could not create a primitive descriptor for the LSTM forward propagation primitive")
        return real(self, x)

    monkeypatch.setattr(Network, "forward", without_bfloat16)
    plain, plain_history = _fit(None, "fp32")
    with caplog.at_level(logging.WARNING, logger="lcflow.train"):
        tried, tried_history = _fit(None, "bf16", amp=True)
    assert "cannot run the network in bfloat16" in caplog.text and "training in float32" in caplog.text
    assert all(torch.equal(a, b) for a, b in zip(_weights(tried), _weights(plain)))
    assert tried_history == [{**row, "samples_per_s": t["samples_per_s"]} for row, t in zip(plain_history, tried_history)]


def test_a_run_with_a_weights_average_keeps_it_and_resumes_it(tmp_path):
    """The average is what the rounds validate and the run keeps (not the last step's weights), the
    checkpoint holds it, and a run cut after round 2 and started again ends where an uncut run ends;
    without validation rows (a refit) the run ends with the average too."""
    uncut, history = _fit(tmp_path / "uncut.pt", "run-e", weight_ema=0.9)
    saved = torch.load(tmp_path / "uncut.pt", weights_only=True)
    assert saved["progress"]["best_round"] == 4 == len(history)  # so the kept weights are the last round's average
    average = {k[len("module."):]: v for k, v in saved["averaged"].items() if k.startswith("module.")}
    kept = uncut.state_dict()
    assert all(torch.equal(kept[k], average[k]) for k in kept)
    assert not all(torch.equal(kept[k], saved["net"][k]) for k in kept)  # not the last step's weights
    plain, _ = _fit(None, "run-p")
    assert not all(torch.equal(a, b) for a, b in zip(_weights(uncut), _weights(plain)))

    cut = tmp_path / "cut.pt"
    cfg = deep.TrainConfig.from_params(check("lstm", {**PARAMS, "weight_ema": 0.9}))
    torch.manual_seed(0)
    deep.fit(LSTM(), _samples(*_data()), cfg, checkpoint=_kept(cut, "run-e"), on_round=lambda row: row["round"] == 2)
    resumed, _ = _fit(cut, "run-e", weight_ema=0.9)
    assert all(torch.equal(a, b) for a, b in zip(_weights(resumed), _weights(uncut)))

    torch.manual_seed(0)
    net = LSTM()
    x, y, _, _ = _data()
    deep.fit(net, deep.Samples(x, y, 3), cfg, checkpoint=_kept(tmp_path / "refit.pt", "refit"), steps=20)
    saved = torch.load(tmp_path / "refit.pt", weights_only=True)
    kept = net.state_dict()
    assert all(torch.equal(kept[k], saved["averaged"]["module." + k]) for k in kept)
    assert not all(torch.equal(kept[k], saved["net"][k]) for k in kept)


def test_the_round_kept_is_the_best_by_the_chosen_measure():
    """select_by: the run keeps the round of the highest val accuracy (ties: the lower loss), or of the
    lowest val loss. On labels independent of the series the two measures pick different rounds in each
    run, so a setting that is ignored keeps the other measure's round and fails."""
    for select_by in ("accuracy", "loss"):
        history = _fit(None, "any", data=_noise, evaluations=12, epochs=12, select_by=select_by)[1]
        table = [(r["round"], r["val_accuracy"], r["val_loss"]) for r in history]
        by_loss = min(table, key=lambda t: (t[2], t[0]))[0]
        by_accuracy = min(table, key=lambda t: (-t[1], t[2], t[0]))[0]
        assert by_loss != by_accuracy, (select_by, table)
        assert history[-1]["best_round"] == (by_loss if select_by == "loss" else by_accuracy), (select_by, table)


def test_a_run_the_min_steps_floor_lengthens_says_so_with_the_key(caplog):
    """240 samples at batch 32 are 8 steps a pass: 4 epochs are 32 steps, and min_steps 80 makes the run 80
    steps, 10 passes, said in the log with the key that shortens it; a run its epochs make longer says
    nothing of it."""
    caplog.set_level(logging.INFO, logger="lcflow")
    _, history = _fit(None, "", min_steps=80)
    assert history[-1]["step"] == 80
    (said,) = [r.getMessage() for r in caplog.records if "min_steps" in r.getMessage()]
    assert said.startswith("epochs 4 would be 32 steps; min_steps 80 makes the run 80 steps (10.0 passes")
    assert "model_params.<model>.min_steps" in said
    caplog.clear()
    _fit(None, "", min_steps=20)
    assert not [r for r in caplog.records if "min_steps" in r.getMessage()]
