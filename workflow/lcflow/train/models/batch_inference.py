"""A network's class probabilities over many rows, a batch at a time (validation rounds, maps, scores)."""

import numpy as np
import torch
from torch import nn

from lcflow.errors import LcflowError


@torch.no_grad()
def predict_proba(
    net: nn.Module, x: np.ndarray, device: torch.device | None = None, batch_size: int = 8192
) -> np.ndarray:
    """Class probabilities in batches, on ``device`` (the model's own when not given; the model is moved
    there: training ends with its weights on the CPU)."""
    device = device or next(net.parameters()).device
    net.to(device)
    net.eval()
    out = []
    for i in range(0, len(x), batch_size):
        xb = torch.from_numpy(x[i : i + batch_size]).to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            out.append(torch.softmax(net(xb).float(), dim=1).cpu().numpy())
    if not out:
        raise LcflowError("nothing to predict")
    return np.concatenate(out)
