"""The weights average (lcflow.train.loop.weight_average): an exponential moving average of a network's
weights and batch-norm statistics."""

from functools import partial

import torch

from lcflow.train.loop.weight_average import weight_average
from lcflow.train.models.tempcnn import Network as TempCNN

#: a small TempCNN (4 features, 6 steps, 3 classes)
TEMPCNN = partial(TempCNN, 4, 6, 3, 8, 3, 16, 0.0)


def test_the_weights_average_follows_each_step_with_the_batch_norm_statistics():
    """weight_ema: after each step the average moves (1 - decay) of the way to the network's weights and
    buffers; the first step copies them."""
    torch.manual_seed(0)
    net = TEMPCNN()
    averaged = weight_average(net, 0.9)
    assert weight_average(net, 0.0) is None
    before = {k: v.clone() for k, v in averaged.module.state_dict().items()}
    with torch.no_grad():
        for t in [*net.parameters(), *(b for b in net.buffers() if b.is_floating_point())]:
            t.add_(1.0)
    averaged.update_parameters(net)  # the first update: a copy
    first = averaged.module.state_dict()
    assert all(torch.equal(first[k], v) for k, v in net.state_dict().items() if v.is_floating_point())
    with torch.no_grad():
        for t in [*net.parameters(), *(b for b in net.buffers() if b.is_floating_point())]:
            t.add_(1.0)
    averaged.update_parameters(net)
    for name, value in averaged.module.state_dict().items():
        if value.is_floating_point():  # 0.9 x (before + 1) + 0.1 x (before + 2)
            assert torch.allclose(value, before[name] + 1.1, atol=1e-5), name
    assert any("running_mean" in name for name in before)  # the statistics are averaged too
