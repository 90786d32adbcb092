"""L-TAE's parts: each head attends over the time steps with weights that sum to one, through its own
master query and channel group, and the steps carry their day of the year."""

import math

import torch

from lcflow.train.models.ltae import Network, day_encoding


def test_the_day_encoding_is_the_papers_sinusoid_of_the_middle_day_of_each_step():
    enc = day_encoding(12, 8)
    day = 0.5 * 365 / 12
    assert enc.shape == (12, 8)
    assert math.isclose(float(enc[0, 0]), math.sin(day), abs_tol=1e-6)
    assert math.isclose(float(enc[0, 1]), math.cos(day), abs_tol=1e-6)
    assert math.isclose(float(enc[0, 2]), math.sin(day / 1000 ** (2 / 8)), abs_tol=1e-6)
    assert len({tuple(row.tolist()) for row in enc}) == 12  # every step its own code


def test_each_head_pools_its_own_channel_group_with_weights_that_sum_to_one():
    torch.manual_seed(0)
    net = Network(n_features=11, steps=12, n_classes=5, heads=4, head_width=3, key_size=8, hidden=16, dropout=0.0).eval()
    x = torch.randn(6, 12, 11)
    seen = {}
    net.mlp.register_forward_hook(lambda m, inp, out: seen.update(pooled=inp[0]))
    logits = net(x)
    assert logits.shape == (6, 5) and torch.isfinite(logits).all()
    # recompute the attention by hand from the network's own layers
    z = net.proj_norm(net.in_proj(x.transpose(1, 2))).transpose(1, 2) + net.position
    keys = net.keys(z).view(6, 12, 4, 8)
    weights = torch.softmax(torch.einsum("hk,bthk->bht", net.query, keys) / math.sqrt(8), dim=-1)
    assert torch.allclose(weights.sum(-1), torch.ones(6, 4))
    by_hand = torch.stack([(weights[:, h, :, None] * z[:, :, 3 * h:3 * h + 3]).sum(1) for h in range(4)], 1)
    assert torch.allclose(seen["pooled"], by_hand.reshape(6, -1), atol=1e-5)
    # a step's values reach the output only through its attention weight: shuffling time changes the result
    assert not torch.allclose(net(x[:, torch.randperm(12)]), logits)
