"""What a training batch goes through before the network sees it: observation dropout, input noise and
mixup, each off at 0, in that order and from the round's seeded generator, so a run repeats and resumes."""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from lcflow.train.loop.mixup import mixup
from lcflow.train.loop.observation_dropout import drop_observations


@dataclass
class Batch:
    """An augmented batch: its inputs, and for mixup the partners' targets and the samples' own share."""

    x: torch.Tensor
    y: torch.Tensor
    partner: torch.Tensor | None = None
    share: float = 1.0

    def loss(self, loss_fn: Callable, logits: torch.Tensor) -> torch.Tensor:
        """The loss on the batch's targets, blended with the partners' by mixup's share."""
        loss = loss_fn(logits, self.y)
        if self.partner is None:
            return loss
        return self.share * loss + (1 - self.share) * loss_fn(logits, self.partner)


def augment(
    xb: torch.Tensor,
    yb: torch.Tensor,
    drop: float,
    noise: float,
    alpha: float,
    observed_flag: int | None,
) -> Batch:
    """``drop_observations``, ``input_noise`` and ``mixup`` of the training recipe applied to one batch.

    Args:
        xb: the batch's inputs.
        yb: its labels.
        drop: the probability that an observed step is hidden (``drop_observations``).
        noise: the standard deviation of the Gaussian noise added to the inputs (``input_noise``).
        alpha: mixup's Beta parameter (0: no mixup).
        observed_flag: the input feature that flags observed steps (pixel series); None: none.
    """
    if drop > 0 and observed_flag is not None:
        xb = drop_observations(xb, drop, observed_flag)
    if noise > 0:
        xb = xb + noise * torch.randn_like(xb)
    if alpha > 0:
        xb, partner, share = mixup(xb, yb, alpha)
        return Batch(xb, yb, partner, share)
    return Batch(xb, yb)
