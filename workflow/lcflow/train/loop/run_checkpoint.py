"""A deep training run's checkpoint: written atomically after every round by rank 0, and read back only
when it is this run's (same samples, parameters and world size) and holds tensors and plain containers
alone (``weights_only``), so a file planted in a model directory cannot run code."""

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.optim.swa_utils import AveragedModel

from lcflow.common.atomic import atomic_path

log = logging.getLogger("lcflow.train.loop.deep")


@dataclass(frozen=True)
class Checkpoint:
    """Where a run's checkpoint goes and what run it is: one of another run is not resumed."""

    path: Path
    fingerprint: str  # the samples and parameters (and, for a refit, its steps)


def read(checkpoint: Path | None, fingerprint: str, world_size: int, elastic: bool) -> dict | None:
    """This run's checkpoint (rank 0 reads it), or None: absent, unreadable, or of another run."""
    if checkpoint is None or not checkpoint.exists():
        return None
    # weights_only: tensors and plain containers only, so a planted file cannot run code
    try:
        saved = torch.load(checkpoint, map_location="cpu", weights_only=True)
    except Exception as exc:  # not a checkpoint of ours, truncated, or holding other objects
        log.warning(
            "checkpoint %s cannot be read safely (%s); starting afresh",
            checkpoint,
            str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__,
        )
        saved = {}
    if (
        not isinstance(saved, dict)
        or saved.get("fingerprint") != fingerprint
        or (saved.get("world_size") != world_size and not elastic)
    ):
        log.info(
            "checkpoint %s is of another run (samples, parameters or world size); starting afresh",
            checkpoint,
        )
        return None
    return saved


def save(
    path: Path,
    net,
    optimizer,
    progress,
    fingerprint: str,
    size: int,
    averaged: AveragedModel | None = None,
) -> None:
    """Write the run's checkpoint (atomically: a kill leaves the last whole one).

    Args:
        path: the checkpoint file.
        net: the network, whose weights are saved.
        optimizer: its optimiser, whose state is saved.
        progress: how far the run is (rounds, the best so far), plain values.
        fingerprint: what the run is: :func:`read` resumes only the same run.
        size: the world size it ran at.
        averaged: the weights' moving average (``weight_ema``), where the recipe keeps one.
    """
    state = {
        "net": net.state_dict(),
        "optimizer": optimizer.state_dict(),
        "progress": progress,
        "fingerprint": fingerprint,
        "world_size": size,
    }
    if averaged is not None:
        state["averaged"] = averaged.state_dict()
    with atomic_path(path, suffix=".pt") as tmp:
        torch.save(state, tmp)
