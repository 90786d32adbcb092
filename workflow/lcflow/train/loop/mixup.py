"""Mixup: a batch trained on blends of its samples and of their targets (``mixup``)."""

import torch


def mixup(
    xb: torch.Tensor, yb: torch.Tensor, alpha: float
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Mixup (Zhang et al. 2018): the batch blended with a permutation of itself by one share drawn from
    Beta(alpha, alpha), so the network learns straight paths between samples instead of memorising
    each (and its label noise). Returns the blend, the partners' targets and the samples' own share;
    the loss is that share of the loss on their targets plus the rest on their partners'."""
    share = float(torch.distributions.Beta(alpha, alpha).sample())
    partner = torch.randperm(len(xb), device=xb.device)
    return share * xb + (1 - share) * xb[partner], yb[partner], share
