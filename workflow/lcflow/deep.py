"""Data-parallel training of a PyTorch classifier: one process or many, same code, same result.

Each rank trains on its own shard of the samples; Horovod averages the gradients; metrics are summed
over ranks; rank 0 writes a checkpoint after every epoch (temporary file, then rename), and a
restarted job resumes from it. Every random draw is seeded from (seed, epoch, rank), so a resumed
run repeats an uninterrupted one.
"""

import hashlib
import logging
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

log = logging.getLogger("lcflow.train")


@dataclass
class TrainConfig:
    epochs: int = 40
    batch_size: int = 128  # per worker; the global batch is batch_size x workers
    learning_rate: float = 0.003  # for lr_reference_batch samples per step
    lr_reference_batch: int = 256
    warmup_epochs: float = 2.0
    optimizer: str = "adamw"
    momentum: float = 0.9
    weight_decay: float = 1e-4
    patience: int = 8
    seed: int = 42
    threads: int = 0
    fp16_allreduce: bool = False
    amp: bool = True  # bfloat16 autocast, on GPU only

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "TrainConfig":
        names = {f.name: f.type for f in fields(cls)}
        return cls(**{k: v for k, v in params.items() if k in names})


TRAIN_DEFAULTS = {f.name: f.default for f in fields(TrainConfig)}


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


def fit(net: nn.Module, x: np.ndarray, y: np.ndarray, x_val: np.ndarray | None, y_val: np.ndarray | None,
        class_weight: np.ndarray, cfg: TrainConfig, comm=None, checkpoint: Path | None = None,
        fingerprint: str = "") -> list[dict[str, float]]:
    """Train ``net`` in place (ending with the best validation epoch); return the history of rank 0."""
    comm = comm or Single()
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    device = device_for(comm.local_rank)
    net.to(device)
    rank, size = comm.rank, comm.size
    shard = np.random.default_rng(cfg.seed).permutation(len(x))[rank::size]
    val_shard = np.arange(0 if x_val is None else len(x_val))[rank::size]
    global_batch = cfg.batch_size * size
    steps = max(1, -(-len(x) // global_batch))
    lr = scaled_lr(cfg.learning_rate, global_batch, cfg.lr_reference_batch)
    # wrap first, schedule the wrapped optimizer: Horovod builds a new optimizer object around the groups
    optimizer = comm.distributed_optimizer(make_optimizer(cfg.optimizer, net.parameters(), lr, cfg.weight_decay,
                                                          cfg.momentum), net, cfg.fp16_allreduce)
    warmup = int(cfg.warmup_epochs * steps) if size > 1 else 0
    start_fraction = min(1.0, cfg.learning_rate / lr) if lr > 0 else 1.0
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, cfg.epochs * steps, warmup, start_fraction))
    loss_fn = nn.CrossEntropyLoss(weight=torch.as_tensor(class_weight, dtype=torch.float32, device=device))
    use_amp = cfg.amp and device.type == "cuda"
    xt = torch.from_numpy(x[shard]).to(device)
    yt = torch.from_numpy(y[shard].astype(np.int64)).to(device)

    saved = None
    if rank == 0 and checkpoint is not None and checkpoint.exists():
        saved = torch.load(checkpoint, map_location="cpu", weights_only=False)
        if saved.get("fingerprint") != fingerprint or saved.get("world_size") != size:
            log.info("checkpoint %s is of another run (samples, parameters or world size); starting afresh", checkpoint)
            saved = None
    saved = comm.broadcast_object(saved)  # every rank restores the same state the same way
    progress = {"epoch": 0, "history": [], "best": -1.0, "best_state": None, "waited": 0}
    if saved is not None:
        net.load_state_dict(saved["net"])
        optimizer.load_state_dict(saved["optimizer"])
        schedule.load_state_dict(saved["schedule"])
        progress = saved["progress"]
        log.info("resumed from checkpoint %s after epoch %d", checkpoint, progress["epoch"])
    comm.broadcast_parameters(net)

    for epoch in range(progress["epoch"] + 1, cfg.epochs + 1):
        net.train()
        torch.manual_seed(_seed(cfg.seed, epoch, rank))
        order = np.random.default_rng(_seed(cfg.seed, epoch, rank, 1)).permutation(len(shard))
        start = time.perf_counter()
        totals = np.zeros(3)  # loss sum, correct, seen
        for batch in np.array_split(order, steps):
            bi = torch.from_numpy(batch).to(device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
                logits = net(xt[bi])
                loss = loss_fn(logits.float(), yt[bi])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            totals += (loss.item() * len(batch), int((logits.argmax(1) == yt[bi]).sum()), len(batch))
        log.info("epoch=%d rank=%d loss_sum=%.6f correct=%d seen=%d", epoch, rank, *totals)
        loss_sum, correct, seen = comm.allreduce_sum(totals)
        elapsed = comm.allreduce_sum(np.array([time.perf_counter() - start]))[0] / size
        row = {"epoch": epoch, "loss": loss_sum / seen, "accuracy": correct / seen,
               "learning_rate": schedule.get_last_lr()[0], "samples_per_s": seen / elapsed}
        if x_val is not None and len(x_val):
            local = np.zeros(3)  # correct, seen, negative log-likelihood
            if len(val_shard):
                proba, yv = predict_proba(net, x_val[val_shard], device), y_val[val_shard]
                local[:] = ((proba.argmax(1) == yv).sum(), len(yv), -np.log(proba[np.arange(len(yv)), yv] + 1e-9).sum())
            v_correct, v_seen, v_nll = comm.allreduce_sum(local)
            row.update(val_accuracy=v_correct / v_seen, val_loss=v_nll / v_seen)
            if row["val_accuracy"] > progress["best"]:
                progress.update(best=row["val_accuracy"], waited=0,
                                best_state={k: v.detach().cpu().clone() for k, v in net.state_dict().items()})
            else:
                progress["waited"] += 1
        progress["history"].append(row)
        progress["epoch"] = epoch
        if rank == 0 and checkpoint is not None:
            _save_checkpoint(checkpoint, net, optimizer, schedule, progress, fingerprint, size)
        if x_val is not None and len(x_val) and progress["waited"] >= cfg.patience:
            log.info("early stop after epoch %d (best val accuracy %.4f)", epoch, progress["best"])
            break
    if progress["best_state"] is not None:
        net.load_state_dict(progress["best_state"])
    net.to("cpu")
    log.info("rank=%d size=%d final weights sha256=%s", rank, size, state_checksum(net))
    return progress["history"]


def _save_checkpoint(path: Path, net, optimizer, schedule, progress, fingerprint: str, size: int) -> None:
    state = {"net": net.state_dict(), "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
             "progress": progress, "fingerprint": fingerprint, "world_size": size}
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
