"""L-TAE's parts: each head attends over the time steps with weights that sum to one, through its own
master query and channel group, and the steps carry their day of the year."""

import datetime as dt
import math

import numpy as np
import pytest
import torch

from lcflow.errors import LcflowError
from lcflow.train.models.ltae import Attention, Model, Network, day_encoding


def test_the_day_encoding_is_the_papers_sinusoid_of_the_middle_day_of_each_step():
    enc = day_encoding(12, 8)
    day = 0.5 * 365 / 12
    assert enc.shape == (12, 8)
    assert math.isclose(float(enc[0, 0]), math.sin(day), abs_tol=1e-6)
    assert math.isclose(float(enc[0, 1]), math.cos(day), abs_tol=1e-6)
    assert math.isclose(float(enc[0, 2]), math.sin(day / 1000 ** (2 / 8)), abs_tol=1e-6)
    assert len({tuple(row.tolist()) for row in enc}) == 12  # every step its own code


def test_dated_steps_are_encoded_at_their_own_days():
    """Irregular dates over two years (as the Slovenia series): each step at its day from 1 January of the
    first year, not at an equal part of one year."""
    dates = [dt.date(2015, 7, 11), dt.date(2015, 7, 31), dt.date(2016, 3, 1), dt.date(2017, 12, 22)]
    enc = day_encoding(4, 6, dates)
    days = [191.5, 211.5, 365 + 60 + 0.5, 365 + 366 + 355 + 0.5]
    for k, day in enumerate(days):
        expected = [f(day / 1000 ** (2 * (i // 2) / 6)) for i, f in zip(range(6), [math.sin, math.cos] * 3)]
        assert np.allclose(enc[k].numpy(), expected, atol=1e-6), k
    assert not torch.allclose(enc, day_encoding(4, 6))


def test_a_model_of_dated_samples_builds_its_network_at_their_days():
    dates = ["2015-07-11", "2015-07-31", "2016-03-01", "2017-12-22"]
    params = {"heads": 2, "head_width": 3, "key_size": 4, "hidden": 8}
    dated = Model(params, 3, 4, 2, time_steps=dates).network()
    assert torch.equal(dated.position, day_encoding(4, 3, [dt.date.fromisoformat(d) for d in dates]).repeat(1, 2))
    with pytest.raises(LcflowError, match=r"model ltae: metadata 'time_steps' holds 4 entries; a list of 5 ISO dates"):
        Model(params, 3, 5, 2, time_steps=dates).network()


def test_weights_of_another_network_are_refused_with_the_file_named(tmp_path):
    params = {"heads": 2, "head_width": 3, "key_size": 4, "hidden": 8}
    twelve = Model(params, 3, 12, 2)
    twelve.net = twelve.network()
    twelve.save_weights(tmp_path / "model.pt")
    with pytest.raises(LcflowError, match=r"model\.pt: the weights do not fit a ltae network of this model's "
                                          r"parameters and samples \(.*size mismatch.*\): retrain the model"):
        Model(params, 3, 6, 2).load_weights(tmp_path / "model.pt")


def test_each_head_pools_its_own_channel_group_with_weights_that_sum_to_one():
    torch.manual_seed(0)
    net = Network(11, 12, 5, Attention(heads=4, head_width=3, key_size=8, hidden=16, dropout=0.0)).eval()
    x = torch.randn(6, 12, 11)
    seen = {}
    net.mlp.register_forward_hook(lambda m, inp, out: seen.update(pooled=inp[0]))
    net.attention_dropout.register_forward_hook(lambda m, inp, out: seen.update(weights=out))  # identity in eval
    logits = net(x)
    assert logits.shape == (6, 5) and torch.isfinite(logits).all()
    # the network's own attention weights: one per head and step, summing to one over the steps
    assert seen["weights"].shape == (6, 4, 12) and (seen["weights"] >= 0).all()
    assert torch.allclose(seen["weights"].sum(-1), torch.ones(6, 4))
    # recompute the attention by hand from the network's own layers
    z = net.proj_norm(net.in_proj(x.transpose(1, 2))).transpose(1, 2) + net.position
    keys = net.keys(z).view(6, 12, 4, 8)
    weights = torch.softmax(torch.einsum("hk,bthk->bht", net.query, keys) / math.sqrt(8), dim=-1)
    assert torch.allclose(seen["weights"], weights, atol=1e-6)
    by_hand = torch.stack([(weights[:, h, :, None] * z[:, :, 3 * h:3 * h + 3]).sum(1) for h in range(4)], 1)
    assert torch.allclose(seen["pooled"], by_hand.reshape(6, -1), atol=1e-5)
    # a step's values reach the output only through its attention weight: shuffling time changes the result
    assert not torch.allclose(net(x[:, torch.randperm(12)]), logits)
