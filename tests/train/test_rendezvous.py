"""Where the ranks of a torch.distributed job meet, read from torchrun's or Slurm's environment."""

import pytest

from lcflow.errors import LcflowError
from lcflow.train.parallel import distributed
from lcflow.train.parallel.distributed import Rendezvous


def test_torchrun_variables_give_rank_size_and_its_master():
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.7",
           "MASTER_PORT": "29611"}
    assert Rendezvous.from_environment(env) == Rendezvous(3, 4, 1, "10.0.0.7", 29611, "torchrun", 2)


def test_a_slurm_step_meets_on_the_node_that_started_it_at_a_port_of_its_job():
    env = {"SLURM_PROCID": "5", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "8", "SLURM_NTASKS": "16",
           "SLURM_LOCALID": "1", "SLURM_LAUNCH_NODE_IPADDR": "10.1.2.3", "SLURM_JOB_ID": "4712345",
           "SLURM_STEP_TASKS_PER_NODE": "2(x3),1,1", "SLURM_TASKS_PER_NODE": "4(x4)", "SLURM_NODEID": "2"}
    meeting = Rendezvous.from_environment(env)
    # the step's task counts, not the job's; the port is fixed by the job, the same on every rank
    assert meeting == Rendezvous(5, 8, 1, "10.1.2.3", distributed.SLURM_PORT_BASE + 2345, "srun", 2)
    assert Rendezvous.from_environment({**env, "SLURM_NODEID": "3", "SLURM_LOCALID": "0"}).local_size == 1
    assert Rendezvous.from_environment({**env, "MASTER_ADDR": "n001", "MASTER_PORT": "3000"}).address == "n001"
    assert Rendezvous.from_environment({**env, "MASTER_PORT": "3000"}).port == 3000


def test_slurm_tasks_per_node_are_read_node_by_node():
    assert distributed.slurm_tasks_per_node("4") == [4]
    assert distributed.slurm_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert distributed.slurm_tasks_per_node("3,1(x2),4") == [3, 1, 1, 4]
    assert distributed.slurm_tasks_per_node("") == []


def test_more_torch_ranks_on_a_node_than_gpus_are_refused_before_they_meet(monkeypatch):
    """Two ranks on one GPU: NCCL's 'Duplicate GPU detected' at the first collective (seen on an H100),
    refused here on every rank of the node, so none waits for the others."""
    import torch

    distributed.check_gpus_per_rank(4, 4, "n001")
    distributed.check_gpus_per_rank(2, 0, "n001")  # no GPU: Gloo, any number of ranks
    with pytest.raises(LcflowError, match=r"^2 torch ranks on node n001 share its 1 GPU\(s\), and NCCL needs a GPU "
                                          r"of its own for each rank: start at most 1 rank\(s\) a node"):
        distributed.check_gpus_per_rank(2, 1, "n001")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("SLURMD_NODENAME", "n007")
    monkeypatch.setattr(distributed, "TORCH_TIMEOUT_MINUTES", 0.05)  # without the check: a store timeout, soon
    for local_rank in (0, 1):  # rank 0 too, which alone would have waited for rank 1
        with pytest.raises(LcflowError, match="^2 torch ranks on node n007 share its 1 GPU"):
            distributed.TorchDistributed(Rendezvous(local_rank, 2, local_rank, "127.0.0.1", 1, "torchrun", 2))


def test_no_launcher_no_rendezvous():
    assert Rendezvous.from_environment({}) is None
    # a batch script outside any step (sbatch without srun) is one process
    assert Rendezvous.from_environment({"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}) is None


def test_one_rank_of_either_backend_is_a_single_process(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", *distributed.LAUNCH_VARIABLES, "SLURM_PROCID", "SLURM_STEP_ID"):
        monkeypatch.delenv(name, raising=False)
    assert distributed.connect("torch").name == "single" and distributed.connect("horovod").name == "single"
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert distributed.connect("torch").name == "single"


def test_a_launcher_the_backend_cannot_join_is_refused(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", *distributed.LAUNCH_VARIABLES, "SLURM_PROCID", "SLURM_STEP_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOROVOD_RANK", "0")
    with pytest.raises(LcflowError, match="backend torch: started by a launcher torch.distributed does not read"):
        distributed.connect("torch")
    monkeypatch.delenv("HOROVOD_RANK")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(LcflowError, match="backend horovod: started by torchrun"):
        distributed.connect("horovod")
    with pytest.raises(LcflowError, match="distributed backend 'nccl': expected one of horovod, torch"):
        distributed.connect("nccl")


def test_elastic_training_under_the_torch_backend_is_refused_before_any_step():
    import numpy as np

    from lcflow.train.loop import deep
    from lcflow.train.models.hyperparameters import check
    from lcflow.train.models.lstm import Network

    class TorchRanks(distributed.Single):
        name = "torch"

    cfg = deep.TrainConfig.from_params(check("lstm", {"elastic": True}))
    x, y = np.zeros((8, 3, 2), np.float32), np.arange(8) % 2
    with pytest.raises(LcflowError, match="elastic training is Horovod's"):
        deep.fit(Network(2, 2, 4, 1, False, 0.0), deep.Samples(x, y, 2), cfg, TorchRanks())


# ------------------------------------------------------------- ranks started as srun starts them, failing


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _srun_rank(rank: int, port: int, args: list[str], program: list[str] | None = None):
    """``lcflow ARGS`` as rank ``rank`` of a two-task Slurm step: the variables srun sets, no launcher above."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "PMI", "HOROVOD_"))}
    env.update(SLURM_PROCID=str(rank), SLURM_STEP_ID="0", SLURM_STEP_NUM_TASKS="2", SLURM_LOCALID=str(rank),
               SLURM_STEP_TASKS_PER_NODE="2", SLURM_NODEID="0", SLURM_JOB_ID="4242", SLURMD_NODENAME="n1",
               SLURM_LAUNCH_NODE_IPADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    return subprocess.Popen([*(program or [str(Path(sys.executable).parent / "lcflow")]), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _last_line(proc, timeout: float = 120) -> tuple[int, str]:
    _, err = proc.communicate(timeout=timeout)
    lines = [line for line in err.splitlines() if line.strip()]
    return proc.returncode, lines[-1] if lines else ""


def _train_rf(stages, tmp_path, name: str) -> list[str]:
    return ["train", "--model", "rf", "--samples", str(stages["samples2018"]), "--out", str(tmp_path / name),
            "--set", "n_estimators=5", "--backend", "torch", "--rendezvous-minutes", "0.05"]


def test_a_rank_whose_partner_never_starts_ends_in_time_naming_the_rendezvous(stages, tmp_path):
    """Rank 1 failed before it could join (or was never started): rank 0 ends after the rendezvous timeout
    (3 s here), and a lone rank 1 after its own, each with one line naming rank, address and port."""
    import time

    port = _free_port()
    started = time.monotonic()
    code, line = _last_line(_srun_rank(0, port, _train_rf(stages, tmp_path, "a")))
    assert code == 2 and line.startswith(f"lcflow train: error: rank 0 of 2 (node n1, started by srun): the "
                                         f"rendezvous at 127.0.0.1:{port} failed: not every rank joined within "
                                         "distributed.rendezvous_minutes (0.05)"), line
    code, line = _last_line(_srun_rank(1, port, _train_rf(stages, tmp_path, "b")))
    assert code == 2 and f"rank 1 of 2 (node n1, started by srun): the rendezvous at 127.0.0.1:{port} failed: rank 0 " \
                         "did not answer" in line, line
    assert time.monotonic() - started < 90
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_port_another_program_holds_ends_both_ranks_in_time(stages, tmp_path):
    """MASTER_PORT held by a program that accepts and never answers: rank 0 cannot listen and says so at
    once; rank 1, connected to that program, waits for an answer that never comes and ends itself."""
    import socket
    import time

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(8)
        port = squatter.getsockname()[1]
        started = time.monotonic()
        ranks = [_srun_rank(r, port, _train_rf(stages, tmp_path, "m")) for r in (0, 1)]
        (code0, line0), (code1, line1) = (_last_line(p) for p in ranks)
    assert code0 == 2 and f"rank 0 of 2 (node n1, started by srun): the rendezvous at 127.0.0.1:{port} failed: its " \
                          "port is in use by another program" in line0, line0
    assert code1 == 2 and line1.startswith(f"lcflow: error: rank 1 of 2 (node n1, started by srun): the rendezvous at "
                                           f"127.0.0.1:{port} is still waiting after 18 s"), line1
    assert time.monotonic() - started < 90


SLOW_RANK_1 = """
import os, sys, time
from lcflow.train.model_dirs import model_dir
real = model_dir.TrainedModel.input_probabilities
def slow(self, x):
    if os.environ["SLURM_PROCID"] == "1":
        time.sleep(600)  # rank 0 maps its windows and waits for this rank in a collective
    return real(self, x)
model_dir.TrainedModel.input_probabilities = slow
from lcflow.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_ends_a_rank_blocked_in_a_collective(stages, tmp_path):
    """Rank 0 waits in an allreduce for a rank that is still busy: SIGTERM (scancel) ends it within the grace
    period, with one line, where Python's own handler would never run until the collective returns."""
    import platform
    import signal
    import sys
    import time

    from lcflow.common import termination
    from lcflow.train import training

    training.train("rf", [str(stages["samples2018"])], tmp_path / "rf", {"n_estimators": 5})
    (tmp_path / "slow.py").write_text(SLOW_RANK_1)
    port = _free_port()
    args = ["predict", "--model-dir", str(tmp_path / "rf"), "--cube", str(stages["cube2018"]), "--out",
            str(tmp_path / "map.tif"), "--confidence", str(tmp_path / "conf.tif"), "--block", "64", "--backend", "torch"]
    ranks = [_srun_rank(r, port, args, program=[sys.executable, str(tmp_path / "slow.py")]) for r in (0, 1)]
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(tmp_path.glob(".lcflow-*-ranks/000000.npz")):
            time.sleep(0.2)
        assert list(tmp_path.glob(".lcflow-*-ranks/000000.npz")), "rank 0 never mapped its windows"
        time.sleep(1)  # rank 0 is in the allreduce now: its windows were the first, and few
        ranks[0].send_signal(signal.SIGTERM)
        sent = time.monotonic()
        code, line = _last_line(ranks[0], timeout=60)
        assert time.monotonic() - sent < termination.GRACE_S + 10
        assert code == 128 + signal.SIGTERM and line == (
            f"lcflow predict: error: stopped by SIGTERM (rank 0 on {platform.node()}) while blocked (in a "
            f"collective, or a read that does not return); ended after {termination.GRACE_S:g} s"), line
    finally:
        ranks[1].kill()
        ranks[1].communicate(timeout=60)
    assert not (tmp_path / "map.tif").exists()


def test_slurm_variables_beyond_the_step_s_own_are_read_as_fallbacks():
    env = {"SLURM_PROCID": "1", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "3", "SLURM_LOCALID": "1",
           "SLURM_TASKS_PER_NODE": "2,1", "SLURM_NODEID": "0", "SLURM_JOB_ID": "7"}
    meeting = Rendezvous.from_environment(env)
    assert (meeting.size, meeting.local_size, meeting.address) == (3, 2, "127.0.0.1")
    beyond = Rendezvous.from_environment({**env, "SLURM_NODEID": "5", "SLURM_LOCALID": "3"})
    assert beyond.local_size == 4  # a node the list does not reach: at least this rank's own place


def test_a_rank_logs_the_network_variables_it_runs_with_and_no_others():
    from lcflow.train.parallel.distributed import network_settings

    env = {"NCCL_SOCKET_IFNAME": "ib0", "MASTER_ADDR": "jwb0001i", "GLOO_SOCKET_IFNAME": "ib0", "HOME": "/home/a",
           "AWS_SECRET_ACCESS_KEY": "x", "OMPI_MCA_btl": "self,tcp", "NCCL_IB_TIMEOUT": "22"}
    assert network_settings(env) == ("GLOO_SOCKET_IFNAME=ib0 MASTER_ADDR=jwb0001i NCCL_IB_TIMEOUT=22 "
                                     "NCCL_SOCKET_IFNAME=ib0 OMPI_MCA_btl=self,tcp")
    assert network_settings({"HOME": "/home/a"}) == "none set"
