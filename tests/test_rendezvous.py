"""Where the ranks of a torch.distributed job meet, read from torchrun's or Slurm's environment."""

import pytest

from lcflow.errors import LcflowError
from lcflow.train import distributed
from lcflow.train.distributed import Rendezvous


def test_torchrun_variables_give_rank_size_and_its_master():
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.7", "MASTER_PORT": "29611"}
    assert Rendezvous.from_environment(env) == Rendezvous(3, 4, 1, "10.0.0.7", 29611, "torchrun")


def test_a_slurm_step_meets_on_the_node_that_started_it_at_a_port_of_its_job():
    env = {"SLURM_PROCID": "5", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "8", "SLURM_NTASKS": "16",
           "SLURM_LOCALID": "1", "SLURM_LAUNCH_NODE_IPADDR": "10.1.2.3", "SLURM_JOB_ID": "4712345"}
    meeting = Rendezvous.from_environment(env)
    # the step's task count, not the job's; the port is fixed by the job, the same on every rank
    assert meeting == Rendezvous(5, 8, 1, "10.1.2.3", distributed.SLURM_PORT_BASE + 2345, "srun")
    assert Rendezvous.from_environment({**env, "MASTER_ADDR": "n001", "MASTER_PORT": "3000"}).address == "n001"
    assert Rendezvous.from_environment({**env, "MASTER_PORT": "3000"}).port == 3000


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
