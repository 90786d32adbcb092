"""Mixed precision: whether a network trains under bfloat16 autocast on this device."""

import copy
import logging

import torch
from torch import nn

log = logging.getLogger("lcflow.train")


def bfloat16_runs(net: nn.Module, xb: torch.Tensor, device: torch.device) -> bool:
    """Whether a forward and backward pass of (a copy of) ``net`` run under bfloat16 autocast on ``device``.

    GPUs that train here do; a CPU may not: on one without native bfloat16 (AVX2 only) oneDNN has no
    bfloat16 LSTM and the forward pass fails, while convolutions and attention fall back and run. So the
    network itself is tried, on a copy in eval mode, which draws no random number and leaves no trace.
    """
    if device.type != "cpu":
        return True
    probe = copy.deepcopy(net).eval()
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = probe(xb)
        out.float().sum().backward()
    except RuntimeError as exc:
        log.debug("bfloat16 autocast fails on this CPU: %s", str(exc).strip().splitlines()[0][:200])
        return False
    return True
