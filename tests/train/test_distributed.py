"""Data-parallel training under horovodrun (Gloo) on this machine: 2 ranks against 1, kill and resume;
and the same under torchrun with the torch.distributed backend."""

import contextlib
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

from lcflow.train import training
from lcflow.train.model_dirs.model_dir import TrainedModel

from ..conftest import built_once

BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
#: six passes in six rounds, no step floor, no early stop, nothing random but the data order
PARAMS = ["--set", "epochs=6", "--set", "min_steps=0", "--set", "evaluations=6", "--set", "hidden_size=32",
          "--set", "patience=100", "--set", "threads=1", "--set", "dropout=0", "--set", "class_weight=none",
          "--set", "input_noise=0"]


def launcher(backend: str, np_: int) -> list[str]:
    """The command that starts ``np_`` ranks of the program after it on this machine, under ``backend``."""
    if backend == "horovod":
        return [str(BIN / "horovodrun"), "-np", str(np_), "-H", f"localhost:{np_}", "--gloo"]
    return [str(BIN / "torchrun"), "--standalone", "--nnodes=1", f"--nproc-per-node={np_}", "--no-python"]


def horovodrun(np_: int, *args: str, log: Path, wait: bool = True, command: str = "train",
               env: dict[str, str] | None = None):
    cmd = [*launcher("horovod", np_), str(BIN / "lcflow"), "-v", command, *args]  # -v: each rank's sums and checksum
    fh = log.open("w")
    proc = subprocess.Popen(cmd, env={**ENV, **(env or {})}, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    if wait:
        assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]
    return proc


def torchrun(np_: int, *args: str, log: Path, command: str = "train", env: dict[str, str] | None = None) -> None:
    cmd = [*launcher("torch", np_), str(BIN / "lcflow"), "-v", command, *args, "--backend", "torch"]
    with log.open("w") as fh:
        done = subprocess.run(cmd, env={**ENV, **(env or {})}, stdout=fh, stderr=subprocess.STDOUT, timeout=600)
    assert done.returncode == 0, log.read_text()[-3000:]


#: how each backend's ranks are started here, and the module's model each trained on two ranks
LAUNCHERS = {"horovod": horovodrun, "torch": torchrun}
TRAINED = {"horovod": "two_ranks", "torch": "two_torch_ranks"}


def test_horovod_build_has_torch_gloo_and_mpi():
    out = subprocess.run([str(BIN / "horovodrun"), "--check-build"], env=ENV, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    checked = {m.group(1) for m in re.finditer(r"\[X\] (\w+)", out.stdout)}
    assert {"PyTorch", "Gloo", "MPI"} <= checked, out.stdout


@pytest.fixture(scope="module")
def samples(stages):
    return [str(stages["samples2018"]), str(stages["samples2019"])]


def lstm_on_two_ranks(backend: str, samples: list[str], tmp_path_factory) -> tuple[Path, str]:
    """The LSTM trained on two ranks under ``backend``'s launcher (LAUNCHERS), once per session (its tests run
    on several workers); its model directory and training log."""
    def build(directory: Path) -> tuple[Path, str]:
        out, log = directory / "lstm", directory / "train.log"
        LAUNCHERS[backend](2, "--model", "lstm", "--samples", *samples, "--out", str(out), *PARAMS,
                           "--set", "batch_size=64", log=log)
        return out, log.read_text()

    return built_once(tmp_path_factory, f"lstm-{backend}", build)


@pytest.fixture(scope="module")
def two_ranks(samples, tmp_path_factory):
    return lstm_on_two_ranks("horovod", samples, tmp_path_factory)


#: another writer of a model folder (argv[1]): holds its lock until the log argv[3] says a rank waits for it
#: (at most 300 s), then publishes argv[2]'s copy
OTHER_WRITER = """
import pathlib, shutil, sys, time
from lcflow.common.atomic import writer_lock
with writer_lock(sys.argv[1]):
    print("holding", flush=True)
    log, deadline = pathlib.Path(sys.argv[3]), time.time() + 300
    while time.time() < deadline and not (log.exists() and "waiting for it" in log.read_text()):
        time.sleep(0.2)
    time.sleep(1)
    shutil.copytree(sys.argv[2], sys.argv[1])
"""


@pytest.mark.parametrize("backend", ["horovod", "torch"])
def test_ranks_that_find_their_model_being_written_wait_and_keep_it(backend, two_ranks, samples, tmp_path):
    """A training restarted while a stopped controller's job still trains the same model: its two ranks
    wait for that writer (rank 0 looks, the others learn in a broadcast), find the model complete and end 0
    without writing a byte of it."""
    out, made = tmp_path / "lstm", two_ranks[0]
    other = subprocess.Popen([sys.executable, "-c", OTHER_WRITER, str(out), str(made), str(tmp_path / "train.log")], env=ENV,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "holding"
        LAUNCHERS[backend](2, "--model", "lstm", "--samples", *samples, "--out", str(out), *PARAMS,
                           log=tmp_path / "train.log", env={"LCFLOW_WRITER_WAIT_MINUTES": "2"})
    finally:
        other.kill()
        other.wait()
    said = (tmp_path / "train.log").read_text()
    assert "waiting for it, at most 2 min" in said and "nothing to do, nothing written" in said, said[-3000:]
    assert "epoch" not in said.lower().split("nothing to do")[-1]
    for name in ("model.json", "model.pt", "metrics.json"):
        assert (out / name).read_bytes() == (made / name).read_bytes(), name


def test_two_ranks_end_with_identical_weights(two_ranks):
    out, log = two_ranks
    sums = dict(re.findall(r"rank=(\d) size=2 final weights sha256=(\w+)", log))
    assert set(sums) == {"0", "1"} and sums["0"] == sums["1"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["launcher"] == "horovod" and metrics["global_batch"] == 128
    assert not (out / "checkpoint.pt").exists()


@pytest.mark.parametrize("backend", ["horovod", "torch"])
def test_two_ranks_map_a_cube_as_one_process_does(backend, request, stages, tmp_path):
    """lcflow predict on two ranks, under horovodrun (Horovod) or torchrun (torch.distributed): the ranks
    share the cube's windows (a run of consecutive ones each, each on its local rank) and the class map,
    confidence and probabilities are one process's, to the byte."""
    out, _ = request.getfixturevalue(TRAINED[backend])
    files = {n: {k: tmp_path / f"{n}_{k}.tif" for k in ("map", "confidence", "probabilities")} for n in (1, 2)}

    def args(n: int) -> list[str]:
        return ["--model-dir", str(out), "--cube", str(stages["cube2019"]), "--out", str(files[n]["map"]),
                "--confidence", str(files[n]["confidence"]), "--probabilities", str(files[n]["probabilities"]),
                "--block", "32", "--timing", str(tmp_path / f"{n}_timing.json")]

    alone = subprocess.run([str(BIN / "lcflow"), "predict", *args(1)], env=ENV, capture_output=True, text=True,
                           timeout=600)
    assert alone.returncode == 0, alone.stderr[-2000:]
    LAUNCHERS[backend](2, *args(2), log=tmp_path / "predict.log", command="predict")
    log = (tmp_path / "predict.log").read_text()
    assert sorted(re.findall(r"rank (\d) of 2 \(local rank (\d)\): windows (\d+)\.\.(\d+) of 16", log)) == \
        [("0", "0", "0", "7"), ("1", "1", "8", "15")], log[-2000:]
    for kind in ("map", "confidence", "probabilities"):
        assert files[2][kind].read_bytes() == files[1][kind].read_bytes(), kind
    for n in (1, 2):  # rank 0 alone writes what the mapping took, for the model comparison
        timing = json.loads((tmp_path / f"{n}_timing.json").read_text())
        assert (timing["ranks"], timing["pixels"], timing["device"]) == (n, 128 * 128, "cpu"), timing
        assert timing["px_per_s"] == pytest.approx(timing["pixels"] / timing["seconds"], rel=1e-3)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging files or ranks' windows


@pytest.mark.parametrize("backend", ["horovod", "torch"])
def test_a_rank_that_fails_names_its_window_and_nothing_is_published(backend, request, stages, tmp_path):
    """Rank 1 fails on its second window, under horovodrun or torchrun: the job ends failed, naming the rank
    and the window, and no map appears; a one-process rerun publishes the whole map."""
    out, _ = request.getfixturevalue(TRAINED[backend])
    code = (
        "import os, sys\n"
        "from lcflow.train.model_dirs import model_dir\n"
        "real = model_dir.TrainedModel.input_probabilities\n"
        "calls = []\n"
        "def failing(self, x):\n"
        "    calls.append(1)\n"
        "    if os.environ.get('HOROVOD_RANK', os.environ.get('RANK')) == '1' and len(calls) == 2:\n"
        "        raise MemoryError('out of device memory')\n"
        "    return real(self, x)\n"
        "model_dir.TrainedModel.input_probabilities = failing\n"
        "from lcflow.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n")
    script = tmp_path / "failing_lcflow.py"
    script.write_text(code)
    cmd = [*launcher(backend, 2), sys.executable, str(script), "predict", "--model-dir", str(out), "--cube",
           str(stages["cube2019"]), "--out", str(tmp_path / "map.tif"), "--confidence", str(tmp_path / "conf.tif"),
           "--block", "32", "--backend", backend]
    done = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert re.search(r"lcflow predict: error: RuntimeError: predict \S+cube.tif: rank 1/2, window 9 \(rows 64\.\.95, "
                     r"cols 32\.\.63\) failed: MemoryError: out of device memory", said), said[-3000:]
    assert not (tmp_path / "map.tif").exists() and not (tmp_path / "conf.tif").exists()
    # rank 0, its collective ended by the failed rank, removes the ranks' staged windows as it unwinds
    assert sorted(p.name for p in tmp_path.iterdir()) == ["failing_lcflow.py"]
    rerun = subprocess.run([str(BIN / "lcflow"), "predict", "--model-dir", str(out), "--cube", str(stages["cube2019"]),
                            "--out", str(tmp_path / "map.tif"), "--confidence", str(tmp_path / "conf.tif"), "--block",
                            "32"], env=ENV, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conf.tif", "failing_lcflow.py", "map.qml", "map.tif",
                                                          "map.tif.aux.xml"]


@pytest.fixture(scope="module")
def two_torch_ranks(samples, tmp_path_factory):
    return lstm_on_two_ranks("torch", samples, tmp_path_factory)


def test_torch_backend_trains_the_weights_horovod_trains_into_the_same_files(two_ranks, two_torch_ranks):
    """torchrun and torch.distributed (Gloo) instead of horovodrun and Horovod: the same global batches, the
    same averaged gradients, so the same weights to the bit; the same model directory, metrics and history."""
    (hvd, hvd_log), (out, log) = two_ranks, two_torch_ranks
    sums = dict(re.findall(r"rank=(\d) size=2 final weights sha256=(\w+)", log))
    assert set(sums) == {"0", "1"}, log[-2000:]
    assert sums == dict(re.findall(r"rank=(\d) size=2 final weights sha256=(\w+)", hvd_log)), log[-2000:]
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in hvd.iterdir())
    a, b = json.loads((out / "metrics.json").read_text()), json.loads((hvd / "metrics.json").read_text())
    assert a["launcher"] == "torch" and a["world_size"] == 2 and a.keys() == b.keys()
    assert a["test"] == b["test"] and a["val"] == b["val"]
    ha, hb = pd.read_csv(out / "history.csv"), pd.read_csv(hvd / "history.csv")
    assert list(ha.columns) == list(hb.columns)
    pd.testing.assert_frame_equal(ha.drop(columns="samples_per_s"), hb.drop(columns="samples_per_s"))


@pytest.mark.parametrize("backend", ["horovod", "torch"])
def test_gradients_are_averaged_in_fp16_when_asked(backend, samples, tmp_path):
    """fp16_allreduce (Horovod's fp16 compression on Gloo, or the torch backend's half-precision allreduce)
    halves the bytes each step sends; the ranks still end identical, and the run differs from the
    full-precision one only by the rounding of the averaged gradients."""
    common = ["--model", "lstm", "--samples", *samples, *PARAMS, "--set", "epochs=2", "--set", "evaluations=2",
              "--set", "batch_size=64"]
    run = LAUNCHERS[backend]
    run(2, *common, "--out", str(tmp_path / "full"), log=tmp_path / "full.log")
    run(2, *common, "--set", "fp16_allreduce=true", "--out", str(tmp_path / "half"), log=tmp_path / "half.log")
    sums = dict(re.findall(r"rank=(\d) size=2 final weights sha256=(\w+)", (tmp_path / "half.log").read_text()))
    full = dict(re.findall(r"rank=(\d) size=2 final weights sha256=(\w+)", (tmp_path / "full.log").read_text()))
    assert set(sums) == {"0", "1"} and sums["0"] == sums["1"] and sums["0"] != full["0"]
    a, b = TrainedModel.load(tmp_path / "half"), TrainedModel.load(tmp_path / "full")
    for (name, wa), wb in zip(a.model.net.state_dict().items(), b.model.net.state_dict().values()):
        assert torch.allclose(wa, wb, atol=2e-2), name


def test_logged_metrics_are_the_allreduced_ones(two_ranks):
    out, log = two_ranks
    history = pd.read_csv(out / "history.csv")
    # one line a round, from rank 0 only: the round, the allreduced loss and accuracies, the rate, time left
    lines = re.findall(r"round (\d+)/6: loss ([\d.]+), accuracy ([\d.]+), val accuracy ([\d.]+), (\d+) samples/s, "
                       r"((?:\d+m)?\d+s) left", log)
    assert [int(r) for r, *_ in lines] == history["round"].tolist(), log[-3000:]
    for (_, loss, accuracy, val, rate, _), (_, row) in zip(lines, history.iterrows()):
        assert float(loss) == pytest.approx(row["loss"], abs=1e-4) and float(accuracy) == pytest.approx(row["accuracy"], abs=1e-4)
        assert float(val) == pytest.approx(row["val_accuracy"], abs=1e-4) and int(rate) > 0
    assert lines[-1][-1] == "0s"
    per_rank = {}
    for r, _, loss_sum, correct, seen in re.findall(
            r"round=(\d+) rank=(\d) size=2 steps=\S+ loss_sum=([\d.]+) correct=(\d+) seen=(\d+)", log):
        per_rank.setdefault(int(r), []).append((float(loss_sum), int(correct), int(seen)))
    assert len(per_rank) == len(history) == 6
    for _, row in history.iterrows():
        ranks = per_rank[int(row["round"])]
        assert len(ranks) == 2 and ranks[0][2] > 0 and ranks[1][2] > 0
        assert row["accuracy"] == pytest.approx(sum(c for _, c, _ in ranks) / sum(s for _, _, s in ranks))
        assert row["loss"] == pytest.approx(sum(loss for loss, _, _ in ranks) / sum(s for _, _, s in ranks), rel=1e-5)


def test_one_and_two_ranks_take_the_same_steps_at_the_same_global_batch(two_ranks, samples, tmp_path):
    """Each global batch is the same samples whoever shares it: 1 rank x 128 and 2 ranks x 64 follow the
    same loss curve and end with the same weights, up to float rounding of the gradient average."""
    params = {k: v for k, v in (p.split("=") for p in PARAMS[1::2])}
    one = training.train("lstm", samples, tmp_path / "one", {**params, "batch_size": 128})
    two = json.loads((two_ranks[0] / "metrics.json").read_text())
    assert one["global_batch"] == two["global_batch"] == 128
    hist1, hist2 = pd.read_csv(tmp_path / "one" / "history.csv"), pd.read_csv(two_ranks[0] / "history.csv")
    assert hist1["step"].tolist() == hist2["step"].tolist() and hist1["epoch"].tolist() == hist2["epoch"].tolist()
    np.testing.assert_allclose(hist1["learning_rate"], hist2["learning_rate"], rtol=1e-12)
    np.testing.assert_allclose(hist1["loss"], hist2["loss"], rtol=2e-3)
    a, b = TrainedModel.load(tmp_path / "one"), TrainedModel.load(two_ranks[0])
    for (name, wa), wb in zip(a.model.net.state_dict().items(), b.model.net.state_dict().values()):
        assert torch.allclose(wa, wb, atol=2e-3, rtol=1e-2), name
    # and a wrong learning-rate scaling would show: the same run at twice the rate leaves the curve
    fast = training.train("lstm", samples, tmp_path / "fast", {**params, "batch_size": 128, "learning_rate": 0.006})
    hist_fast = pd.read_csv(tmp_path / "fast" / "history.csv")
    assert np.abs(hist_fast["loss"] - hist2["loss"]).max() > 20 * np.abs(hist1["loss"] - hist2["loss"]).max()
    assert fast["global_batch"] == 128


def test_two_ranks_learn_from_the_same_forest_teacher_as_one_process(two_ranks, samples, tmp_path):
    """``distill``: the ranks share the teacher's five forests out (three and two) and sum their out-of-fold
    probabilities, so two ranks x 64 train towards the targets one process x 128 does and end with its
    weights, up to the gradient average's rounding."""
    LAUNCHERS["horovod"](2, "--model", "lstm", "--samples", *samples, "--out", str(tmp_path / "two"), *PARAMS,
                         "--set", "batch_size=64", "--set", "distill=0.5", log=tmp_path / "two.log")
    log = (tmp_path / "two.log").read_text()
    taught = re.findall(r"distill: .* take 0\.50 of the targets; they agree with ([0-9.]+) of the (\d+) training", log)
    assert len(taught) == 2 and taught[0] == taught[1], log[-3000:]
    shared = set(re.findall(r"distill: rank (\d) of 2 fits the teacher's folds \[([0-9, ]+)\] of 5", log))
    assert shared == {("0", "0, 2, 4"), ("1", "1, 3")}, log[-3000:]
    sums = dict(re.findall(r"rank=(\d) size=2 final weights sha256=(\w+)", log))
    assert set(sums) == {"0", "1"} and sums["0"] == sums["1"]
    params = {k: v for k, v in (p.split("=") for p in PARAMS[1::2])}
    one = training.train("lstm", samples, tmp_path / "one", {**params, "batch_size": 128, "distill": 0.5})
    assert one["params"]["distill"] == 0.5
    a, b = TrainedModel.load(tmp_path / "one"), TrainedModel.load(tmp_path / "two")
    for (name, wa), wb in zip(a.model.net.state_dict().items(), b.model.net.state_dict().values()):
        assert torch.allclose(wa, wb, atol=2e-3, rtol=1e-2), name
    # the session's two-rank run of the same recipe without a teacher ends elsewhere
    plain = TrainedModel.load(two_ranks[0]).model.net.state_dict()
    assert not all(torch.allclose(w, plain[name], atol=2e-3, rtol=1e-2) for name, w in a.model.net.state_dict().items())


#: a ``sitecustomize`` for a run's ranks: rank 0 holds still once it has saved the checkpoint of round
#: ``LCFLOW_TEST_HOLD_ROUND`` and says so in ``checkpoint.pt.held``, until ``checkpoint.pt.released`` appears
#: (at most 10 minutes), so a test kills a run at a round it knows, however fast the machine
HOLD_AT_ROUND = """
import os
import time
from pathlib import Path

from lcflow.train.loop import run_checkpoint

_save = run_checkpoint.save


def _save_then_hold(path, net, optimizer, progress, *args, **kwargs):
    _save(path, net, optimizer, progress, *args, **kwargs)
    held, released = Path(str(path) + ".held"), Path(str(path) + ".released")
    if progress["round"] == int(os.environ["LCFLOW_TEST_HOLD_ROUND"]) and not released.exists():
        held.touch()
        deadline = time.time() + 600
        while not released.exists() and time.time() < deadline:
            time.sleep(0.05)


run_checkpoint.save = _save_then_hold
"""


def held_at(tmp_path: Path, round_: int) -> dict[str, str]:
    """The environment that makes a run's rank 0 hold after round ``round_`` (:data:`HOLD_AT_ROUND`)."""
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOLD_AT_ROUND)
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(hook), ENV.get("PYTHONPATH")])),
            "LCFLOW_TEST_HOLD_ROUND": str(round_)}


def wait_held(proc: subprocess.Popen, checkpoint: Path, log: Path) -> None:
    """Until rank 0 holds after its checkpoint (:func:`held_at`); the run must still be going."""
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not Path(f"{checkpoint}.held").exists():
        time.sleep(0.05)
    assert proc.poll() is None and Path(f"{checkpoint}.held").exists(), log.read_text()[-3000:]


def test_killed_training_resumes_from_its_checkpoint(two_ranks, samples, tmp_path):
    """The session's two-rank training (``two_ranks``, 6 rounds) again, killed after its second round and
    started again: it resumes from its checkpoint and ends where the uninterrupted run ended."""
    reference, _ = two_ranks
    rounds = len(pd.read_csv(reference / "history.csv"))
    out = tmp_path / "lstm"
    args = ["--model", "lstm", "--samples", *samples, *PARAMS, "--set", "batch_size=64", "--out", str(out)]
    proc = horovodrun(2, *args, log=tmp_path / "first.log", wait=False, env=held_at(tmp_path, 2))
    checkpoint = out / "checkpoint.pt"
    wait_held(proc, checkpoint, tmp_path / "first.log")
    # the ranks run in sessions of their own: killed with horovodrun, and gone before the checkpoint is read
    workers = _workers(proc.pid)
    assert len(workers) == 2, workers
    os.killpg(proc.pid, signal.SIGKILL)
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
    gone = time.time() + 30
    while any(Path(f"/proc/{pid}").exists() and _running(pid) for pid in workers) and time.time() < gone:
        time.sleep(0.05)
    done_rounds = torch.load(checkpoint, weights_only=True)["progress"]["round"]
    assert done_rounds == 2 < rounds and not (out / "metrics.json").exists()
    horovodrun(2, *args, log=tmp_path / "second.log")
    second = (tmp_path / "second.log").read_text()
    assert f"resumed from checkpoint {checkpoint} after round {done_rounds}" in second
    assert not re.search(r"round=1 rank=", second)
    history = pd.read_csv(out / "history.csv")
    assert history["round"].tolist() == list(range(1, rounds + 1)) and rounds == 6
    # the resumed run ends exactly where the uninterrupted one did
    a, b = TrainedModel.load(out), TrainedModel.load(reference)
    for (ka, va), (kb, vb) in zip(a.model.net.state_dict().items(), b.model.net.state_dict().items()):
        assert ka == kb and torch.equal(va, vb), ka
    assert np.allclose(history["val_accuracy"], pd.read_csv(reference / "history.csv")["val_accuracy"])


def test_two_ranks_refit_on_train_and_val_rows_and_end_identical(samples, tmp_path):
    """With refit, every rank runs the selection run and then the refit; both end identical on both
    ranks, and the model written is the refit's, of the steps metrics.json records."""
    from lcflow.train.loop.deep import state_checksum

    out = tmp_path / "lstm"
    horovodrun(2, "--model", "lstm", "--samples", *samples, *PARAMS, "--set", "epochs=2", "--set", "evaluations=2",
               "--set", "refit=true", "--out", str(out), log=tmp_path / "refit.log")
    log = (tmp_path / "refit.log").read_text()
    finals = re.findall(r"rank=(\d) size=2 final weights sha256=(\w+)", log)
    by_rank = {rank: [s for r, s in finals if r == rank] for rank in "01"}
    assert len(by_rank["0"]) == 2 and by_rank["0"] == by_rank["1"], log[-3000:]  # selection run, then refit
    assert by_rank["0"][0] != by_rank["0"][1]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["refit"]["n_samples"] == metrics["n_train"] + metrics["val"]["n_samples"]
    assert f"schedule: {metrics['refit']['steps']} steps" in log
    assert state_checksum(TrainedModel.load(out).model.net) == by_rank["0"][1]
    assert not (out / training.REFIT_CHECKPOINT).exists() and not (out / training.CHECKPOINT).exists()


@pytest.fixture(scope="module")
def rf_accuracy(samples, tmp_path_factory) -> float:
    """The forest's test accuracy on the module's samples, once per session."""
    return built_once(tmp_path_factory, "rf",
                      lambda directory: training.train("rf", samples, directory / "rf", {})["test"]["overall_accuracy"])


@pytest.mark.parametrize("model,params", [("lstm", {"hidden_size": 32}), ("tempcnn", {"filters": 32, "dense": 64}),
                                          ("ltae", {})])
def test_deep_models_beat_the_majority_class_on_demo_samples(model, params, samples, rf_accuracy, tmp_path):
    """Labels are CORINE's (100 m, generalised), so agreement is capped well below 1 and how far above the
    majority rate it can go depends on the sample drawn: the Random Forest on the same samples is the
    yardstick, beside a kappa beyond chance and a clear margin over the majority class."""
    metrics = training.train(model, samples, tmp_path / model, {"epochs": 15, "min_steps": 0, "threads": 1, **params})
    test = metrics["test"]
    majority = max(c["support"] for c in test["per_class"].values()) / test["n_samples"]
    assert test["overall_accuracy"] >= rf_accuracy - 0.03, (test, rf_accuracy)
    assert test["overall_accuracy"] > majority + 0.1 and test["kappa"] > 0.5, (test, majority)


def _workers(root: int) -> list[int]:
    """Training processes (python .../lcflow train) below ``root``; Horovod starts each in a session of its own."""
    parent, command = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command[int(entry.name)] = (entry / "cmdline").read_bytes().split(b"\0")
            parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue

    def below_root(pid: int) -> bool:
        while pid > 1:
            pid = parent.get(pid, 0)
            if pid == root:
                return True
        return False

    return [pid for pid, cmd in command.items()
            if len(cmd) > 2 and cmd[1].endswith(b"/lcflow") and b"train" in cmd[2:4] and below_root(pid)]


def _running(pid: int) -> bool:
    """Not ended: alive, or not yet a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_elastic_training_goes_on_when_a_worker_dies(samples, tmp_path):
    # two names for this host: Horovod blacklists a host whose worker failed, with all its slots
    hosts = tmp_path / "hosts.sh"
    hosts.write_text("#!/bin/sh\necho localhost:1\necho 127.0.0.1:1\n")
    hosts.chmod(0o755)
    out, log = tmp_path / "lstm", tmp_path / "elastic.log"
    cmd = [str(BIN / "horovodrun"), "-np", "2", "--min-np", "1", "--max-np", "2",
           "--host-discovery-script", str(hosts), "--network-interface", "lo",
           str(BIN / "lcflow"), "-v", "train", "--model", "lstm", "--samples", *samples, "--out", str(out),
           *PARAMS, "--set", "epochs=14", "--set", "evaluations=14", "--set", "batch_size=64", "--set", "elastic=true",
           "--set", "weight_ema=0.9"]  # the weights' average is part of the state a reset rolls back
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, env={**ENV, **held_at(tmp_path, 3)}, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        checkpoint = out / "checkpoint.pt"
        wait_held(proc, checkpoint, log)
        workers = _workers(proc.pid)
        assert len(workers) == 2, log.read_text()[-3000:]
        os.kill(max(workers), signal.SIGKILL)
        Path(f"{checkpoint}.released").touch()
        assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert "elastic reset: now 1 workers" in text
    history = pd.read_csv(out / "history.csv")
    assert history["round"].tolist() == list(range(1, 15))
    assert history["workers"].iloc[0] == 2 and history["workers"].iloc[-1] == 1
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 1 and metrics["test"]["overall_accuracy"] > 0.5
    assert re.search(r"rank=0 size=1 final weights sha256=", text)


def _fake_slurm(tmp_path: Path, nodelist: str) -> dict:
    """squeue and scontrol stand-ins that print what Slurm prints for a job on ``nodelist``."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "squeue").write_text(f'#!/bin/sh\n[ "$*" = "-j 42 -h -o %N" ] && echo "{nodelist}"\n')
    (bin_ / "scontrol").write_text('#!/bin/sh\n[ "$1 $2" = "show hostnames" ] || exit 3\n'
                                   'echo "$3" | sed "s/\\[1-3\\]//" | while read p; do for i in 1 2 3; do echo "$p$i"; done; done\n')
    for f in bin_.iterdir():
        f.chmod(0o755)
    return {**ENV, "PATH": f"{bin_}{os.pathsep}{ENV['PATH']}", "SLURM_JOB_ID": "42"}


SLURM_HOSTS = Path(__file__).resolve().parents[2] / "workflow" / "scripts" / "slurm_hosts.sh"


def test_slurm_host_discovery_lists_the_jobs_nodes(tmp_path):
    env = _fake_slurm(tmp_path, "jwb[1-3]")
    out = subprocess.run([str(SLURM_HOSTS)], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["jwb1", "jwb2", "jwb3"]


def test_slurm_host_discovery_outside_a_job_says_so(tmp_path):
    env = {k: v for k, v in ENV.items() if k != "SLURM_JOB_ID"}
    out = subprocess.run([str(SLURM_HOSTS)], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "SLURM_JOB_ID" in out.stderr
