"""Mixup (lcflow.train.loop.mixup): a batch blended with a permutation of itself."""

import numpy as np


def test_mixup_blends_each_sample_with_one_partner_of_its_batch():
    """Every blended sample is share x itself + (1 - share) x its partner, one share for the batch, the
    partners a permutation of the batch, their targets the partners' own."""
    import torch

    from lcflow.train.loop.mixup import mixup

    n = 8
    xb = torch.eye(n).reshape(n, 1, n) * 10.0  # sample i: 10 at feature i, else 0
    yb = torch.arange(n) + 100
    torch.manual_seed(3)
    blend, y_partner, share = mixup(xb, yb, 0.4)
    assert 0.0 < share < 1.0 and blend.shape == xb.shape
    rows = blend.reshape(n, n) / 10.0
    partner = (y_partner - 100).numpy()
    assert sorted(partner) == list(range(n)) and (partner != np.arange(n)).any()
    for i in range(n):
        expected = np.zeros(n)
        expected[i] += share
        expected[partner[i]] += 1 - share
        np.testing.assert_allclose(rows[i].numpy(), expected, atol=1e-6)
    torch.manual_seed(3)
    again = mixup(xb, yb, 0.4)
    assert again[2] == share and torch.equal(again[0], blend)  # the round's seed fixes the draw
