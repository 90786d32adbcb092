"""Who this process is in a data-parallel job, and the collective operations training needs.

Launched by ``horovodrun``, ``mpirun`` or ``srun --mpi=pmix``, lcflow trains with Horovod; started
bare it is a single process and needs no Horovod at all. The launcher is configuration (a rule's
``launcher`` resource), never code.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # torch is imported where a collective needs it: a single process (a forest's
    import torch  # prediction) never loads it

#: set by horovodrun (Gloo), mpirun (Open MPI) and srun --mpi=pmix / pmi2
LAUNCH_VARIABLES = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")


class Single:
    """One process: every collective is the identity."""

    name = "single"
    rank, size, local_rank = 0, 1, 0

    def allreduce_sum(self, values: np.ndarray, name: str = "") -> np.ndarray:
        return np.asarray(values, dtype=np.float64)

    def broadcast_object(self, obj: Any) -> Any:
        return obj

    def distributed_optimizer(self, optimizer: torch.optim.Optimizer, model: torch.nn.Module, fp16: bool):
        return optimizer

    def broadcast_parameters(self, model: torch.nn.Module) -> None:
        pass


class Horovod:
    """horovod.torch: gradients averaged by allreduce (Gloo, MPI or NCCL), state broadcast from rank 0."""

    name = "horovod"

    def __init__(self) -> None:
        import horovod.torch as hvd

        hvd.init()
        self.hvd = hvd
        self._calls = 0

    # live, not cached: an elastic job changes them when workers leave or join
    @property
    def rank(self) -> int:
        return self.hvd.rank()

    @property
    def size(self) -> int:
        return self.hvd.size()

    @property
    def local_rank(self) -> int:
        return self.hvd.local_rank()

    def allreduce_sum(self, values: np.ndarray, name: str = "") -> np.ndarray:
        """Sum over ranks; ``name`` must be the same on every rank (give one that survives a reset)."""
        if not name:
            self._calls += 1
            name = f"lcflow.sum.{self._calls}"
        import torch

        t = torch.as_tensor(np.asarray(values, dtype=np.float64))
        return self.hvd.allreduce(t, op=self.hvd.Sum, name=name).numpy()

    def broadcast_object(self, obj: Any) -> Any:
        # an explicit name: Horovod's default is the object's type, which differs where only rank 0 has one
        self._calls += 1
        return self.hvd.broadcast_object(obj, root_rank=0, name=f"lcflow.object.{self._calls}")

    def distributed_optimizer(self, optimizer, model, fp16: bool):
        compression = self.hvd.Compression.fp16 if fp16 else self.hvd.Compression.none
        return self.hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                             compression=compression, op=self.hvd.Average)

    def broadcast_parameters(self, model) -> None:
        self.hvd.broadcast_parameters(model.state_dict(), root_rank=0)


def launched() -> bool:
    """True when a parallel launcher started this process."""
    return any(v in os.environ for v in LAUNCH_VARIABLES)


def connect() -> Single | Horovod:
    """Horovod when launched in parallel, else a single process."""
    return Horovod() if launched() else Single()
