"""Who this process is in a data-parallel job, and the collective operations training needs.

Two backends give the same collectives: Horovod (``horovodrun``, ``mpirun`` or ``srun --mpi=pmix``) and
``torch.distributed`` (``torchrun``, or ``srun``: the process group is formed from the launcher's
environment, NCCL between GPUs, Gloo between CPUs). Started bare, lcflow is a single process and loads
neither. The launcher is configuration (a rule's resources), the backend a config key
(``distributed.backend``), never code.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from lcflow.common import writer_wait
from lcflow.errors import LcflowError

if TYPE_CHECKING:  # torch is imported where a collective needs it: a single process (a forest's
    import torch  # prediction) never loads it

#: set by horovodrun (Gloo), mpirun (Open MPI) and srun --mpi=pmix / pmi2
LAUNCH_VARIABLES = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")
BACKENDS = ("horovod", "torch")
#: the port of a Slurm job's rendezvous is this plus the job id modulo 10000 (MASTER_PORT overrides it)
SLURM_PORT_BASE = 20000
#: how long a rank waits in one collective (a rank 0 that validates or writes while the others wait)
TORCH_TIMEOUT_MINUTES = 30
#: how long a rank waits at start-up for the others to meet (distributed.rendezvous_minutes; set from the
#: command line by :func:`configure`)
rendezvous_minutes: float = 5.0
#: beyond the rendezvous timeout, how long a rank stuck in a connection that never answers (a port that
#: another program holds) is given before it ends itself (torch's client retries for a few seconds more)
STUCK_GRACE_S = 15.0


class Single:
    """One process: every collective is the identity."""

    name = "single"
    rank, size, local_rank = 0, 1, 0

    def allreduce_sum(self, values: np.ndarray, name: str = "") -> np.ndarray:
        return np.asarray(values, dtype=np.float64)

    def broadcast_object(self, obj: Any) -> Any:
        return obj

    def distributed_optimizer(
        self, optimizer: torch.optim.Optimizer, model: torch.nn.Module, fp16: bool
    ):
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
        return self.hvd.DistributedOptimizer(
            optimizer,
            named_parameters=model.named_parameters(),
            compression=compression,
            op=self.hvd.Average,
        )

    def broadcast_parameters(self, model) -> None:
        self.hvd.broadcast_parameters(model.state_dict(), root_rank=0)


@dataclass(frozen=True)
class Rendezvous:
    """Where this rank is in a torch.distributed job and where the ranks meet (rank 0's address)."""

    rank: int
    size: int
    local_rank: int
    address: str
    port: int
    launcher: str
    local_size: int = 1  # ranks on this node

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> "Rendezvous | None":
        """From ``torchrun``'s variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
        MASTER_PORT), else from a Slurm job step's (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID,
        SLURM_STEP_TASKS_PER_NODE and SLURM_NODEID; rank 0 runs on the node that started the step,
        SLURM_LAUNCH_NODE_IPADDR, and the port follows from the job id); None when no launcher started this
        process. MASTER_ADDR and MASTER_PORT, where set, win."""
        env = os.environ if env is None else env
        if "RANK" in env and "WORLD_SIZE" in env:
            local_rank = int(env.get("LOCAL_RANK", 0))
            return cls(
                int(env["RANK"]),
                int(env["WORLD_SIZE"]),
                local_rank,
                env.get("MASTER_ADDR", "127.0.0.1"),
                int(env.get("MASTER_PORT", 29500)),
                "torchrun",
                int(env.get("LOCAL_WORLD_SIZE") or local_rank + 1),
            )
        if "SLURM_PROCID" in env and "SLURM_STEP_ID" in env:
            size = int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or 1)
            port = (
                env.get("MASTER_PORT") or SLURM_PORT_BASE + int(env.get("SLURM_JOB_ID", 0)) % 10000
            )
            address = env.get("MASTER_ADDR") or env.get("SLURM_LAUNCH_NODE_IPADDR") or "127.0.0.1"
            local_rank = int(env.get("SLURM_LOCALID", 0))
            per_node = slurm_tasks_per_node(
                env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE") or ""
            )
            node = int(env.get("SLURM_NODEID", 0))
            local_size = max(local_rank + 1, per_node[node] if node < len(per_node) else 0)
            return cls(
                int(env["SLURM_PROCID"]), size, local_rank, address, int(port), "srun", local_size
            )
        return None


def slurm_tasks_per_node(value: str) -> list[int]:
    """Slurm's compressed tasks per node (``2(x3),1``: three nodes of 2, then one of 1) as a list by node."""
    counts: list[int] = []
    for part in filter(None, value.split(",")):
        tasks, _, repeat = part.partition("(x")
        counts += [int(tasks)] * (int(repeat.rstrip(")")) if repeat else 1)
    return counts


def check_gpus_per_rank(local_size: int, gpus: int, node: str) -> None:
    """NCCL refuses two ranks on one GPU (only when the ranks meet, one collective in): refused here, on
    every rank of the node alike, before any rank waits for the others."""
    if gpus and local_size > gpus:
        raise LcflowError(
            f"{local_size} torch ranks on node {node} share its {gpus} GPU(s), and NCCL needs a GPU "
            f"of its own for each rank: start at most {gpus} rank(s) a node (torchrun --nproc-per-node, "
            "TASKS_PER_NODE of the Slurm profile), or hide the GPUs (CUDA_VISIBLE_DEVICES=) to train "
            "on CPUs over Gloo"
        )


class TorchDistributed:
    """torch.distributed: gradients averaged by one allreduce a step (NCCL on GPUs, Gloo on CPUs), state
    broadcast from rank 0; the same collectives, checkpoints and results as :class:`Horovod`."""

    name = "torch"

    def __init__(self, meeting: Rendezvous) -> None:
        import datetime

        import torch
        import torch.distributed as dist

        self.rank, self.size, self.local_rank = meeting.rank, meeting.size, meeting.local_rank
        gpu = torch.cuda.is_available()
        if gpu:
            check_gpus_per_rank(meeting.local_size, torch.cuda.device_count(), node_name())
            torch.cuda.set_device(self.local_rank % torch.cuda.device_count())
        self.device = (
            torch.device("cuda", torch.cuda.current_device()) if gpu else torch.device("cpu")
        )
        with _deadline(meeting, rendezvous_minutes * 60 + STUCK_GRACE_S):
            store = _store(meeting, datetime.timedelta(minutes=rendezvous_minutes))
            try:
                dist.init_process_group(
                    "nccl" if gpu else "gloo",
                    store=store,
                    rank=self.rank,
                    world_size=self.size,
                    timeout=datetime.timedelta(minutes=TORCH_TIMEOUT_MINUTES),
                )
            except dist.DistError as exc:
                raise _no_rendezvous(meeting, exc) from exc
        atexit.register(lambda: dist.is_initialized() and dist.destroy_process_group())
        self.dist = dist

    def allreduce_sum(self, values: np.ndarray, name: str = "") -> np.ndarray:
        import torch

        t = torch.as_tensor(np.asarray(values, dtype=np.float64)).to(self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.SUM)
        return t.cpu().numpy()

    def broadcast_object(self, obj: Any) -> Any:
        box = [obj]
        self.dist.broadcast_object_list(box, src=0, device=self.device)
        return box[0]

    def distributed_optimizer(self, optimizer, model, fp16: bool):
        return AveragingOptimizer(optimizer, self.dist, self.size, fp16)

    def broadcast_parameters(self, model) -> None:
        for tensor in model.state_dict().values():
            self.dist.broadcast(tensor.data if hasattr(tensor, "data") else tensor, src=0)


def configure(minutes: float) -> None:
    """How long ranks wait for each other at start-up (``distributed.rendezvous_minutes``)."""
    global rendezvous_minutes
    rendezvous_minutes = float(minutes)


def _where(meeting: Rendezvous) -> str:
    return (
        f"rank {meeting.rank} of {meeting.size} (node {node_name()}, started by {meeting.launcher}): the "
        f"rendezvous at {meeting.address}:{meeting.port}"
    )


def _no_rendezvous(meeting: Rendezvous, exc: BaseException) -> LcflowError:
    """One line for a rendezvous that failed: who, where, why, and what to do."""
    text = " ".join(str(exc).split("Exception raised from")[0].split())
    if "EADDRINUSE" in text or "address already in use" in text.lower():
        why = (
            "its port is in use by another program (another job's rank 0?): set MASTER_PORT to a free port, or "
            "leave it unset under Slurm, where it follows from the job id"
        )
    elif meeting.rank == 0:
        why = (
            f"not every rank joined within distributed.rendezvous_minutes ({rendezvous_minutes:g}): a rank that "
            f"failed at start-up (see its log) or never started ({text[:200]})"
        )
    else:
        why = (
            f"rank 0 did not answer within distributed.rendezvous_minutes ({rendezvous_minutes:g}): it failed at "
            f"start-up (see its log) or is not listening there ({text[:200]})"
        )
    return LcflowError(f"{_where(meeting)} failed: {why}")


def _store(meeting: Rendezvous, timeout) -> Any:
    """The rendezvous's key-value store, rank 0 serving it: every rank joins it, or it fails in time."""
    from torch.distributed import DistError, TCPStore

    try:
        return TCPStore(
            meeting.address,
            meeting.port,
            meeting.size,
            meeting.rank == 0,
            timeout=timeout,
            wait_for_workers=True,
        )
    except DistError as exc:
        raise _no_rendezvous(meeting, exc) from exc


@contextlib.contextmanager
def _deadline(meeting: Rendezvous, seconds: float):
    """End this process, with one line, if the rendezvous is not over after ``seconds``: a connection to a
    port that another program holds waits for an answer that never comes, past torch's own timeout."""

    def give_up() -> None:
        print(
            f"lcflow: error: {_where(meeting)} is still waiting after {seconds:g} s: another program holds "
            f"the port, or rank 0 hangs; set MASTER_PORT to a free port",
            file=sys.stderr,
            flush=True,
        )
        os._exit(2)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


class AveragingOptimizer:
    """An optimizer whose step first averages the gradients over the ranks, as Horovod's
    DistributedOptimizer does (one flat allreduce a step, in fp16 when asked); everything else, the state
    a checkpoint holds included, is the wrapped optimizer's."""

    def __init__(self, optimizer, dist, size: int, fp16: bool) -> None:
        self.optimizer, self.dist, self.size, self.fp16 = optimizer, dist, size, fp16

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state) -> None:
        self.optimizer.load_state_dict(state)

    def step(self) -> None:
        import torch

        params = [p for g in self.optimizer.param_groups for p in g["params"] if p.requires_grad]
        for p in params:
            # a parameter this step did not reach: a zero gradient, as the others send
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        grads = [p.grad for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        sent = flat.to(torch.float16) if self.fp16 else flat
        self.dist.all_reduce(sent, op=self.dist.ReduceOp.SUM)
        flat = sent.to(flat.dtype) / self.size
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()
        self.optimizer.step()


#: the variables that steer how ranks find and talk to each other (interfaces, rendezvous, transports)
NETWORK_PREFIXES = ("NCCL_", "GLOO_", "UCX_", "OMPI_MCA_btl")
NETWORK_NAMES = ("MASTER_ADDR", "MASTER_PORT")


def network_settings(env: Mapping[str, str] | None = None) -> str:
    """The network variables a rank runs with (``NAME=value``, sorted; "none set" where none is), for its
    log: what a site's per-job set-up (the Slurm profile's JOB_SETUP) gave the ranks."""
    env = os.environ if env is None else env
    found = sorted(
        f"{k}={v}" for k, v in env.items() if k.startswith(NETWORK_PREFIXES) or k in NETWORK_NAMES
    )
    return " ".join(found) or "none set"


def node_name() -> str:
    """The node this process runs on, as Slurm names it (its host name elsewhere), for logs and errors."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def launched() -> bool:
    """True when a parallel launcher started this process."""
    return any(v in os.environ for v in LAUNCH_VARIABLES)


def connect(backend: str = "horovod") -> Single | Horovod | TorchDistributed:
    """The backend's process group when a launcher started several processes, else a single process; its
    rank 0 then holds the command's writer locks (lcflow.common.writer_wait.settle)."""
    comm = _connect(backend)
    writer_wait.settle(comm)
    return comm


def _connect(backend: str) -> Single | Horovod | TorchDistributed:
    if backend not in BACKENDS:
        raise LcflowError(f"distributed backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    if backend == "torch":
        meeting = Rendezvous.from_environment()
        if meeting is None and launched():
            raise LcflowError(
                "distributed backend torch: started by a launcher torch.distributed does not read "
                "(horovodrun or mpirun); start the ranks with torchrun or srun"
            )
        return TorchDistributed(meeting) if meeting is not None and meeting.size > 1 else Single()
    if not launched() and int(os.environ.get("WORLD_SIZE", 1)) > 1:
        raise LcflowError(
            "distributed backend horovod: started by torchrun, whose ranks Horovod does not join; "
            "set distributed.backend: torch, or start the ranks with horovodrun or srun"
        )
    return Horovod() if launched() else Single()
