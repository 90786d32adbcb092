"""Where the ranks of a torch.distributed job meet, read from torchrun's or Slurm's environment."""

import pytest

from lcflow.errors import LcflowError
from lcflow.train import distributed
from lcflow.train.distributed import Rendezvous


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

    from lcflow.train import deep
    from lcflow.train.hyperparameters import check
    from lcflow.train.models.lstm import Network

    class TorchRanks(distributed.Single):
        name = "torch"

    cfg = deep.TrainConfig.from_params(check("lstm", {"elastic": True}))
    x, y = np.zeros((8, 3, 2), np.float32), np.arange(8) % 2
    with pytest.raises(LcflowError, match="elastic training is Horovod's"):
        deep.fit(Network(2, 2, 4, 1, False, 0.0), x, y, None, None, 2, cfg, comm=TorchRanks())
