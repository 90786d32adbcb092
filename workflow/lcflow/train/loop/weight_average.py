"""An exponential moving average of a network's weights, kept beside it during training (``weight_ema``)."""

from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


def weight_average(net: nn.Module, decay: float) -> AveragedModel | None:
    """An exponential moving average of ``net``'s weights and buffers (batch-norm statistics too), to be
    updated after every optimizer step; None when ``decay`` is 0.

    The weights of one step wander with the last batches; the average over the last 1 / (1 - decay)
    steps is a calmer model to validate and keep where rounds end at a high rate (on the 500-row
    tables, whose runs end on a cosine's tail, 0.99 lifted no model). Every rank takes the same steps,
    so every rank's average is the same without communication.
    """
    if decay <= 0:
        return None
    return AveragedModel(net, multi_avg_fn=get_ema_multi_avg_fn(decay), use_buffers=True)
