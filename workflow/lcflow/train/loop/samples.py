"""The rows a deep training run learns from, and the seeded stream in which it sees them: epoch after
epoch, each a permutation drawn from (seed, epoch), so a resumed run sees what an uninterrupted one does."""

import hashlib
from dataclasses import dataclass

import numpy as np
import torch


def seeded(*parts: int) -> int:
    """A seed drawn from ``parts`` (seed, round, rank, ...): the same on every run and machine."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "little")


@dataclass(frozen=True)
class Samples:
    """What a run learns from: the training rows and what they are to learn, and the validation rows."""

    x: np.ndarray
    y: np.ndarray
    n_classes: int
    #: None: no validation (a refit), the run ends with its last weights
    x_val: np.ndarray | None = None
    y_val: np.ndarray | None = None
    #: the rows' class probabilities to learn instead of y (a teacher's)
    targets: np.ndarray | None = None
    observed_flag: int | None = None  # the feature that flags a step as observed in pixel series


class SampleStream:
    """The samples on their device, the stream of their order, and the validation samples."""

    def __init__(self, samples: Samples, seed: int, device: torch.device):
        self.n, self.seed = len(samples.x), seed
        self.x = torch.from_numpy(np.ascontiguousarray(samples.x)).to(device)
        self.y = torch.from_numpy(samples.y.astype(np.int64)).to(device)
        # what the loss trains towards: the labels, or class probabilities per row
        targets = samples.targets
        self.targets = (
            self.y if targets is None else torch.from_numpy(targets.astype(np.float32)).to(device)
        )
        self.x_val, self.y_val = samples.x_val, samples.y_val
        self._orders: dict[int, np.ndarray] = {}

    def order(self, epoch: int) -> np.ndarray:
        """The samples' order in pass ``epoch``: a permutation seeded by (seed, epoch)."""
        if epoch not in self._orders:
            self._orders = {
                epoch: np.random.default_rng(seeded(self.seed, epoch)).permutation(self.n)
            }
        return self._orders[epoch]

    def take(self, position: int, count: int) -> np.ndarray:
        """Indices of the stream's samples ``position`` .. ``position + count`` (across epochs)."""
        out, filled = np.empty(count, dtype=np.int64), 0
        while filled < count:
            epoch, offset = divmod(position + filled, self.n)
            part = self.order(epoch)[offset : offset + count - filled]
            out[filled : filled + len(part)] = part
            filled += len(part)
        return out

    def val_shard(self, rank: int, size: int) -> np.ndarray:
        """The validation rows rank ``rank`` of ``size`` predicts."""
        return np.arange(0 if self.x_val is None else len(self.x_val))[rank::size]
