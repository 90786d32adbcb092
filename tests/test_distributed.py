"""Data-parallel training under horovodrun (Gloo) on this machine: 2 ranks against 1, kill and resume."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from lcflow import training
from lcflow.trained import TrainedModel

BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
PARAMS = ["--set", "epochs=6", "--set", "hidden_size=32", "--set", "patience=100", "--set", "threads=1"]


def horovodrun(np_: int, *args: str, log: Path, wait: bool = True):
    cmd = [str(BIN / "horovodrun"), "-np", str(np_), "-H", f"localhost:{np_}", "--gloo",
           str(BIN / "lcflow"), "train", *args]
    fh = log.open("w")
    proc = subprocess.Popen(cmd, env=ENV, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    if wait:
        assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]
    return proc


def test_horovod_build_has_torch_gloo_and_mpi():
    out = subprocess.run([str(BIN / "horovodrun"), "--check-build"], env=ENV, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    checked = {m.group(1) for m in re.finditer(r"\[X\] (\w+)", out.stdout)}
    assert {"PyTorch", "Gloo", "MPI"} <= checked, out.stdout


@pytest.fixture(scope="module")
def samples(stages):
    return [str(stages["samples2018"]), str(stages["samples2019"])]


@pytest.fixture(scope="module")
def two_ranks(samples, tmp_path_factory):
    out = tmp_path_factory.mktemp("hvd2") / "lstm"
    log = out.parent / "train.log"
    horovodrun(2, "--model", "lstm", "--samples", *samples, "--out", str(out), *PARAMS, "--set", "batch_size=64", log=log)
    return out, log.read_text()


def test_two_ranks_end_with_identical_weights(two_ranks):
    out, log = two_ranks
    sums = dict(re.findall(r"rank=(\d) size=2 final weights sha256=(\w+)", log))
    assert set(sums) == {"0", "1"} and sums["0"] == sums["1"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["launcher"] == "horovod" and metrics["global_batch"] == 128
    assert not (out / "checkpoint.pt").exists()


def test_logged_metrics_are_the_allreduced_ones(two_ranks):
    out, log = two_ranks
    history = pd.read_csv(out / "history.csv")
    per_rank = {}
    for epoch, rank, loss_sum, correct, seen in re.findall(
            r"epoch=(\d+) rank=(\d) loss_sum=([\d.]+) correct=(\d+) seen=(\d+)", log):
        per_rank.setdefault(int(epoch), []).append((float(loss_sum), int(correct), int(seen)))
    assert len(per_rank) == len(history) == 6
    for _, row in history.iterrows():
        ranks = per_rank[int(row["epoch"])]
        assert len(ranks) == 2 and ranks[0][2] > 0 and ranks[1][2] > 0
        assert row["accuracy"] == pytest.approx(sum(c for _, c, _ in ranks) / sum(s for _, _, s in ranks))
        assert row["loss"] == pytest.approx(sum(l for l, _, _ in ranks) / sum(s for _, _, s in ranks), rel=1e-5)


def test_one_and_two_ranks_agree_at_the_same_global_batch(two_ranks, samples, tmp_path):
    one = training.train("lstm", samples, tmp_path / "one", {"epochs": 6, "hidden_size": 32, "patience": 100,
                                                             "batch_size": 128, "threads": 1})
    two = json.loads((two_ranks[0] / "metrics.json").read_text())
    assert one["global_batch"] == two["global_batch"] == 128
    hist1, hist2 = pd.read_csv(tmp_path / "one" / "history.csv"), pd.read_csv(two_ranks[0] / "history.csv")
    assert abs(hist1["val_accuracy"].max() - hist2["val_accuracy"].max()) < 0.04
    assert abs(one["test"]["overall_accuracy"] - two["test"]["overall_accuracy"]) < 0.05


def test_killed_training_resumes_from_its_checkpoint(samples, tmp_path):
    common = ["--model", "lstm", "--samples", *samples, *PARAMS, "--set", "epochs=16", "--set", "batch_size=64"]
    reference = tmp_path / "uninterrupted"
    horovodrun(2, *common, "--out", str(reference), log=tmp_path / "reference.log")
    out = tmp_path / "lstm"
    args = [*common, "--out", str(out)]
    proc = horovodrun(2, *args, log=tmp_path / "first.log", wait=False)
    checkpoint = out / "checkpoint.pt"
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if checkpoint.exists() and torch.load(checkpoint, weights_only=False)["progress"]["epoch"] >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "training ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_epochs = torch.load(checkpoint, weights_only=False)["progress"]["epoch"]
    assert 2 <= done_epochs < 16 and not (out / "metrics.json").exists()
    horovodrun(2, *args, log=tmp_path / "second.log")
    second = (tmp_path / "second.log").read_text()
    assert f"resumed from checkpoint {checkpoint} after epoch {done_epochs}" in second
    assert not re.search(r"epoch=1 rank=", second)
    history = pd.read_csv(out / "history.csv")
    assert history["epoch"].tolist() == list(range(1, 17))
    # the resumed run ends exactly where the uninterrupted one did
    a, b = TrainedModel.load(out), TrainedModel.load(reference)
    for (ka, va), (kb, vb) in zip(a.model.net.state_dict().items(), b.model.net.state_dict().items()):
        assert ka == kb and torch.equal(va, vb), ka
    assert np.allclose(history["val_accuracy"], pd.read_csv(reference / "history.csv")["val_accuracy"])


@pytest.mark.parametrize("model,params", [("lstm", {"hidden_size": 32}), ("tempcnn", {"filters": 32, "dense": 64})])
def test_deep_models_beat_the_majority_class_on_demo_samples(model, params, samples, tmp_path):
    metrics = training.train(model, samples, tmp_path / model, {"epochs": 15, "threads": 1, **params})
    test = metrics["test"]
    majority = max(c["support"] for c in test["per_class"].values()) / test["n_samples"]
    # labels are CORINE's (100 m, generalised), so agreement is capped well below 1; kappa is beyond chance
    assert test["overall_accuracy"] > majority + 0.15 and test["kappa"] > 0.5, (test, majority)
