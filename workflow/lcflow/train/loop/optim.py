"""Optimizers and the learning-rate schedule of data-parallel training.

The learning rate scales linearly with the global batch (Goyal et al. 2017): ``learning_rate`` is the
rate for ``lr_reference_batch`` samples per step; with more workers at the same per-worker batch the
rate grows, reached by a linear warm-up from the single-worker rate, then decays along a cosine.
"""

import math

import torch


class Lamb(torch.optim.Optimizer):
    """LAMB (You et al. 2019): Adam moments with a per-layer trust ratio, for large global batches."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
    ):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                m_hat = m / (1 - beta1 ** state["step"])
                v_hat = v / (1 - beta2 ** state["step"])
                update = m_hat / (v_hat.sqrt() + group["eps"])
                if group["weight_decay"]:
                    update = update.add(p, alpha=group["weight_decay"])
                w_norm, u_norm = p.norm(), update.norm()
                trust = torch.where(
                    (w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm)
                )
                p.add_(update, alpha=-group["lr"] * float(trust))
        return loss


def make_optimizer(
    name: str, params, lr: float, weight_decay: float, momentum: float
) -> torch.optim.Optimizer:
    """The training recipe's optimiser.

    Args:
        name: sgd (Nesterov where ``momentum`` > 0), adamw or lamb.
        params: the parameters (or parameter groups) to optimise.
        lr: the learning rate.
        weight_decay: decoupled weight decay (SGD: L2).
        momentum: SGD's momentum (the others ignore it).
    """
    if name == "sgd":
        return torch.optim.SGD(
            params, lr=lr, momentum=momentum, nesterov=momentum > 0, weight_decay=weight_decay
        )
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    if name == "lamb":
        return Lamb(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer {name!r}; use sgd, adamw or lamb")


def scaled_lr(learning_rate: float, global_batch: int, reference_batch: int) -> float:
    return learning_rate * global_batch / reference_batch


def lr_factor(step: int, total_steps: int, warmup_steps: int, start_fraction: float) -> float:
    """Multiplier of the scaled rate at ``step``: linear warm-up from ``start_fraction``, then cosine to 0."""
    if warmup_steps > 0 and step < warmup_steps:
        return start_fraction + (1 - start_fraction) * step / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
