
import numpy as np
import pytest
import torch

from lcflow.train.loop import optim
from lcflow.train.parallel import distributed


def test_learning_rate_scales_with_the_global_batch():
    assert optim.scaled_lr(0.003, 256, 256) == 0.003
    assert optim.scaled_lr(0.003, 1024, 256) == pytest.approx(0.012)


def test_warm_up_then_cosine():
    f = [optim.lr_factor(s, total_steps=100, warmup_steps=10, start_fraction=0.25) for s in range(101)]
    assert f[0] == 0.25 and f[5] == pytest.approx(0.625) and f[10] == 1.0
    assert f[55] == pytest.approx(0.5) and f[100] == pytest.approx(0.0, abs=1e-12)
    assert all(a >= b for a, b in zip(f[10:], f[11:]))
    assert optim.lr_factor(0, 100, 0, 0.5) == 1.0


@pytest.mark.parametrize("name", ["sgd", "adamw", "lamb"])
def test_optimizers_minimise_a_quadratic(name):
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(20))
    target = torch.linspace(-1, 1, 20)
    opt = optim.make_optimizer(name, [w], lr=0.05, weight_decay=0.0, momentum=0.9)
    start = float(((w.detach() - target) ** 2).sum())
    for _ in range(300):
        opt.zero_grad()
        loss = ((w - target) ** 2).sum()
        loss.backward()
        opt.step()
    assert float(((w.detach() - target) ** 2).sum()) < 0.01 * start
    with pytest.raises(ValueError, match="adam"):
        optim.make_optimizer("adam", [w], 0.1, 0.0, 0.0)


def test_lamb_step_is_bounded_by_the_trust_ratio():
    """LAMB's update of a layer has norm lr x ||w|| (trust ratio), whatever the gradient scale."""
    for scale in (1e-3, 1e3):
        w = torch.nn.Parameter(torch.full((10,), 2.0))
        opt = optim.Lamb([w], lr=0.1)
        w.grad = torch.full((10,), scale)
        before = w.detach().clone()
        opt.step()
        assert float((w.detach() - before).norm()) == pytest.approx(0.1 * float(before.norm()), rel=1e-3)


def test_single_process_needs_no_horovod(monkeypatch):
    for v in distributed.LAUNCH_VARIABLES:
        monkeypatch.delenv(v, raising=False)
    comm = distributed.connect()
    assert isinstance(comm, distributed.Single) and comm.size == 1
    assert comm.allreduce_sum(np.array([1.0, 2.0])).tolist() == [1.0, 2.0]
    assert comm.broadcast_object({"a": 1}) == {"a": 1}
    monkeypatch.setenv("HOROVOD_RANK", "0")
    assert distributed.launched()
