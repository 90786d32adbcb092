"""Data-parallel training of a PyTorch classifier: one process or many, same code, same result.

Each rank trains on its own shard of the samples; Horovod averages the gradients; metrics are summed
over ranks; rank 0 writes a checkpoint after every epoch (temporary file, then rename), and a
restarted job resumes from it. Every random draw is seeded from (seed, epoch, rank), so a resumed
run repeats an uninterrupted one.
"""

import copy
import hashlib
import logging
import os
import socket
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .atomic import atomic_path
from .distributed import Single
from .errors import LcflowError
from .optim import lr_factor, make_optimizer, scaled_lr
from .params import TRAINING

log = logging.getLogger("lcflow.train")


@dataclass
class TrainConfig:
    """How a deep model is trained; names, defaults and ranges in :data:`lcflow.params.TRAINING`."""

    epochs: int
    batch_size: int  # per worker; the global batch is batch_size x workers
    learning_rate: float  # for lr_reference_batch samples per step
    lr_reference_batch: int
    warmup_epochs: float
    optimizer: str
    momentum: float
    weight_decay: float
    patience: int
    seed: int
    threads: int
    fp16_allreduce: bool
    amp: bool  # bfloat16 autocast, on GPU only
    elastic: bool  # hvd.elastic: survive workers leaving (launch with horovodrun --min-np/--max-np)

    @classmethod
    def from_params(cls, given: dict[str, Any]) -> "TrainConfig":
        """From a model's parameters (checked, defaults filled in by :func:`lcflow.params.check`)."""
        return cls(**{f.name: given.get(f.name, TRAINING[f.name].default) for f in fields(cls)})


def device_for(local_rank: int) -> torch.device:
    """One GPU per local rank when there are GPUs, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def state_checksum(net: nn.Module) -> str:
    """SHA-256 of all weights, to show that ranks (or runs) hold identical models."""
    h = hashlib.sha256()
    for name, tensor in sorted(net.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def _seed(*parts: int) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "little")


def learning_rate(cfg: TrainConfig, size: int, progress_epochs: float) -> float:
    """Rate at a (fractional) epoch for ``size`` workers: scaled to the global batch, warm-up, cosine."""
    lr = scaled_lr(cfg.learning_rate, cfg.batch_size * size, cfg.lr_reference_batch)
    warmup = cfg.warmup_epochs if size > 1 else 0.0
    return lr * lr_factor(progress_epochs, cfg.epochs, warmup, min(1.0, cfg.learning_rate / lr))


def fit(net: nn.Module, x: np.ndarray, y: np.ndarray, x_val: np.ndarray | None, y_val: np.ndarray | None,
        class_weight: np.ndarray, cfg: TrainConfig, comm=None, checkpoint: Path | None = None,
        fingerprint: str = "") -> list[dict[str, float]]:
    """Train ``net`` in place (ending with the best validation epoch); return the history of rank 0."""
    comm = comm or Single()
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    device = device_for(comm.local_rank)
    log.info("rank=%d size=%d local_rank=%d node=%s device=%s", comm.rank, comm.size, comm.local_rank,
             os.environ.get("SLURMD_NODENAME") or socket.gethostname(), device)
    net.to(device)
    # wrap first, then touch the state: Horovod builds a new optimizer object around the groups
    optimizer = comm.distributed_optimizer(make_optimizer(cfg.optimizer, net.parameters(), cfg.learning_rate,
                                                          cfg.weight_decay, cfg.momentum), net, cfg.fp16_allreduce)
    loss_fn = nn.CrossEntropyLoss(weight=torch.as_tensor(class_weight, dtype=torch.float32, device=device))
    data = _Data(x, y, x_val, y_val, cfg.seed)

    saved = None
    if comm.rank == 0 and checkpoint is not None and checkpoint.exists():
        # weights_only: tensors and plain containers only, so a planted file cannot run code
        try:
            saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
        except Exception as exc:  # not a checkpoint of ours, truncated, or holding other objects
            log.warning("checkpoint %s cannot be read safely (%s); starting afresh", checkpoint,
                        str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__)
            saved = {}
        if not isinstance(saved, dict) or saved.get("fingerprint") != fingerprint or \
                (saved.get("world_size") != comm.size and not cfg.elastic):
            log.info("checkpoint %s is of another run (samples, parameters or world size); starting afresh", checkpoint)
            saved = None
    saved = comm.broadcast_object(saved)  # every rank restores the same state the same way
    progress = {"epoch": 0, "history": [], "best": -1.0, "best_state": None, "waited": 0}
    if saved is not None:
        net.load_state_dict(saved["net"])
        optimizer.load_state_dict(saved["optimizer"])
        progress = saved["progress"]
        log.info("resumed from checkpoint %s after epoch %d", checkpoint, progress["epoch"])
    comm.broadcast_parameters(net)

    def one_epoch(epoch: int) -> bool:
        """Train and validate one epoch on the current world; False once training should stop."""
        row = _train_epoch(net, optimizer, loss_fn, data, cfg, comm, device, epoch)
        _validate(net, data, comm, device, epoch, row, progress)
        progress["history"].append(row)
        progress["epoch"] = epoch
        if comm.rank == 0 and checkpoint is not None:
            _save_checkpoint(checkpoint, net, optimizer, progress, fingerprint, comm.size)
        if data.x_val is not None and len(data.x_val) and progress["waited"] >= cfg.patience:
            log.info("early stop after epoch %d (best val accuracy %.4f)", epoch, progress["best"])
            return False
        return True

    if cfg.elastic and comm.name == "horovod":
        progress = _fit_elastic(net, optimizer, progress, one_epoch, cfg, comm)
    else:
        for epoch in range(progress["epoch"] + 1, cfg.epochs + 1):
            if not one_epoch(epoch):
                break
    if progress["best_state"] is not None:
        net.load_state_dict(progress["best_state"])
    net.to("cpu")
    log.info("rank=%d size=%d final weights sha256=%s", comm.rank, comm.size, state_checksum(net))
    return progress["history"]


def _fit_elastic(net, optimizer, progress: dict, one_epoch, cfg: TrainConfig, comm) -> dict:
    """Epochs under ``hvd.elastic``: a worker that dies rolls the others back to the last committed
    epoch, the world shrinks (or grows), shards and learning rate follow, and training goes on."""
    hvd = comm.hvd
    state = hvd.elastic.TorchState(model=net, optimizer=optimizer, progress=copy.deepcopy(progress))
    state.register_reset_callbacks([lambda: log.info("elastic reset: now %d workers", hvd.size())])

    @hvd.elastic.run
    def loop(state):
        while state.progress["epoch"] < cfg.epochs:
            committed = copy.deepcopy(state.progress)  # after a reset: the last commit; never share its lists
            progress.clear()
            progress.update(committed)
            go_on = one_epoch(progress["epoch"] + 1)
            state.progress = dict(progress)
            state.commit()
            if not go_on:
                break

    loop(state)
    return state.progress


class _Data:
    """The samples and a fixed global order; each rank's shard is taken for the world of the moment."""

    def __init__(self, x, y, x_val, y_val, seed: int):
        self.x, self.y, self.x_val, self.y_val = x, y.astype(np.int64), x_val, y_val
        self.order = np.random.default_rng(seed).permutation(len(x))

    def shard(self, rank: int, size: int) -> np.ndarray:
        return self.order[rank::size]

    def val_shard(self, rank: int, size: int) -> np.ndarray:
        return np.arange(0 if self.x_val is None else len(self.x_val))[rank::size]


def _train_epoch(net, optimizer, loss_fn, data: _Data, cfg: TrainConfig, comm, device, epoch: int) -> dict:
    rank, size = comm.rank, comm.size
    net.train()
    torch.manual_seed(_seed(cfg.seed, epoch, rank))
    shard = data.shard(rank, size)
    xt, yt = torch.from_numpy(data.x[shard]).to(device), torch.from_numpy(data.y[shard]).to(device)
    steps = max(1, -(-len(data.x) // (cfg.batch_size * size)))  # the same on every rank
    order = np.random.default_rng(_seed(cfg.seed, epoch, rank, 1)).permutation(len(shard))
    use_amp = cfg.amp and device.type == "cuda"
    start = time.perf_counter()
    totals = np.zeros(3)  # loss sum, correct, seen
    for i, batch in enumerate(np.array_split(order, steps)):
        lr = learning_rate(cfg, size, epoch - 1 + i / steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        bi = torch.from_numpy(batch).to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
            logits = net(xt[bi])
            loss = loss_fn(logits.float(), yt[bi])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        totals += (loss.item() * len(batch), int((logits.argmax(1) == yt[bi]).sum()), len(batch))
    log.info("epoch=%d rank=%d size=%d loss_sum=%.6f correct=%d seen=%d", epoch, rank, size, *totals)
    loss_sum, correct, seen = comm.allreduce_sum(totals, name=f"lcflow.train.{epoch}")
    elapsed = comm.allreduce_sum(np.array([time.perf_counter() - start]), name=f"lcflow.time.{epoch}")[0] / size
    return {"epoch": epoch, "loss": float(loss_sum / seen), "accuracy": float(correct / seen), "learning_rate": lr,
            "samples_per_s": float(seen / elapsed), "workers": size}


def _validate(net, data: _Data, comm, device, epoch: int, row: dict, progress: dict) -> None:
    """Validation accuracy and loss summed over ranks; keeps the best weights in ``progress``."""
    if data.x_val is None or not len(data.x_val):
        return
    shard = data.val_shard(comm.rank, comm.size)
    local = np.zeros(3)  # correct, seen, negative log-likelihood
    if len(shard):
        proba, yv = predict_proba(net, data.x_val[shard], device), data.y_val[shard]
        local[:] = ((proba.argmax(1) == yv).sum(), len(yv), -np.log(proba[np.arange(len(yv)), yv] + 1e-9).sum())
    v_correct, v_seen, v_nll = comm.allreduce_sum(local, name=f"lcflow.val.{epoch}")
    row.update(val_accuracy=float(v_correct / v_seen), val_loss=float(v_nll / v_seen))
    if row["val_accuracy"] > progress["best"]:
        progress.update(best=row["val_accuracy"], waited=0,
                        best_state={k: v.detach().cpu().clone() for k, v in net.state_dict().items()})
    else:
        progress["waited"] += 1


def _save_checkpoint(path: Path, net, optimizer, progress, fingerprint: str, size: int) -> None:
    state = {"net": net.state_dict(), "optimizer": optimizer.state_dict(), "progress": progress,
             "fingerprint": fingerprint, "world_size": size}
    with atomic_path(path, suffix=".pt") as tmp:
        torch.save(state, tmp)


@torch.no_grad()
def predict_proba(net: nn.Module, x: np.ndarray, device: torch.device | None = None, batch_size: int = 8192) -> np.ndarray:
    """Class probabilities in batches, on ``device`` (the model's own when not given)."""
    device = device or next(net.parameters()).device
    net.eval()
    out = []
    for i in range(0, len(x), batch_size):
        xb = torch.from_numpy(x[i:i + batch_size]).to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            out.append(torch.softmax(net(xb).float(), dim=1).cpu().numpy())
    if not out:
        raise LcflowError("nothing to predict")
    return np.concatenate(out)
