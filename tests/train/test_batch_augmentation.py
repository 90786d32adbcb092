"""What a training batch goes through (lcflow.train.loop.batch_augmentation): observation dropout, noise
and mixup in the recipe's order, and the loss of a mixed batch."""

import numpy as np


def test_a_batch_is_augmented_in_the_recipes_order_and_its_loss_blends_the_partners():
    """augment: observation dropout, then noise, then mixup, from one seeded stream (what the modules give
    applied by hand in that order, to the bit); all off leaves the batch itself; the mixup loss is the
    share's blend of the two targets' losses."""
    import torch

    from lcflow.train.loop.batch_augmentation import augment
    from lcflow.train.loop.mixup import mixup
    from lcflow.train.loop.observation_dropout import drop_observations

    generator = np.random.default_rng(5)
    xb = torch.as_tensor(generator.normal(size=(16, 10, 3)), dtype=torch.float32)
    xb[..., 2] = torch.as_tensor(generator.random((16, 10)) > 0.3, dtype=torch.float32)
    yb = torch.as_tensor(generator.integers(0, 4, 16))
    plain = augment(xb, yb, 0.0, 0.0, 0.0, observed_flag=2)
    assert plain.x is xb and plain.partner is None
    torch.manual_seed(7)
    batch = augment(xb, yb, 0.3, 0.2, 0.4, observed_flag=2)
    torch.manual_seed(7)
    by_hand = drop_observations(xb, 0.3, 2)
    by_hand = by_hand + 0.2 * torch.randn_like(by_hand)
    by_hand, partner, share = mixup(by_hand, yb, 0.4)
    assert torch.equal(batch.x, by_hand) and torch.equal(batch.partner, partner) and batch.share == share
    logits = torch.as_tensor(generator.normal(size=(16, 4)), dtype=torch.float32)
    loss_fn = torch.nn.CrossEntropyLoss()
    expected = share * loss_fn(logits, yb) + (1 - share) * loss_fn(logits, partner)
    assert torch.equal(batch.loss(loss_fn, logits), expected)
    assert torch.equal(plain.loss(loss_fn, logits), loss_fn(logits, yb))
