"""What a training step sends between ranks: the torch backend's AveragingOptimizer allreduces every
gradient in one flat tensor a step, in float16 (half the bytes) where fp16_allreduce asks it, and averages;
Horovod's optimizer is asked for its fp16 compression. Checked with a recording stand-in for the process
group, so the bytes on the wire are counted rather than inferred from the weights."""

from types import SimpleNamespace

import pytest
import torch

from lcflow.train.parallel.distributed import AveragingOptimizer, Horovod


class RecordingGroup:
    """torch.distributed's all_reduce for two ranks, where the other rank's gradient is ``other``."""

    ReduceOp = SimpleNamespace(SUM="sum")

    def __init__(self, other: float) -> None:
        self.other, self.calls = other, []

    def all_reduce(self, tensor: torch.Tensor, op) -> None:
        self.calls.append((tensor.dtype, tensor.numel(), tensor.element_size() * tensor.numel(), op))
        tensor += self.other


def _step(fp16: bool, other: float = 2.0):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Linear(4, 3))
    unused = torch.nn.Parameter(torch.ones(6))  # a parameter this step does not reach
    group = RecordingGroup(other)
    optimizer = AveragingOptimizer(torch.optim.SGD([*net.parameters(), unused], lr=0.0), group, 2, fp16)
    net(torch.randn(8, 5)).square().sum().backward()
    own = [p.grad.clone() for p in net.parameters()]
    optimizer.step()
    return net, unused, own, group


@pytest.mark.parametrize("fp16, dtype", [(False, torch.float32), (True, torch.float16)])
def test_one_flat_allreduce_a_step_in_the_asked_precision(fp16, dtype):
    net, unused, _, group = _step(fp16)
    n = sum(p.numel() for p in net.parameters()) + unused.numel()
    assert len(group.calls) == 1
    sent_dtype, numel, nbytes, op = group.calls[0]
    assert sent_dtype == dtype and numel == n and op == "sum"
    assert nbytes == n * (2 if fp16 else 4)  # fp16 halves what a step sends


@pytest.mark.parametrize("fp16", [False, True])
def test_the_gradients_are_averaged_and_an_unreached_parameter_gets_the_others_mean(fp16):
    net, unused, own, _ = _step(fp16, other=2.0)
    for grad, p in zip(own, net.parameters()):
        summed = (grad.to(torch.float16) + 2.0).float() if fp16 else grad + 2.0  # the sum in what was sent
        torch.testing.assert_close(p.grad, summed / 2, atol=1e-7, rtol=0)
    torch.testing.assert_close(unused.grad, torch.full((6,), 1.0))  # its zero, plus the other rank's 2, halved


def test_horovod_is_asked_for_fp16_compression_only_where_fp16_allreduce_is_set():
    seen = []
    hvd = SimpleNamespace(Compression=SimpleNamespace(fp16="fp16", none="none"), Average="average",
                          DistributedOptimizer=lambda optimizer, **kw: seen.append(kw) or optimizer)
    backend = Horovod.__new__(Horovod)  # without hvd.init(): only the optimizer's arguments are looked at
    backend.hvd = hvd
    net = torch.nn.Linear(3, 2)
    for fp16 in (True, False):
        backend.distributed_optimizer(torch.optim.SGD(net.parameters(), lr=0.1), net, fp16)
    assert [kw["compression"] for kw in seen] == ["fp16", "none"]
    assert all(kw["op"] == "average" for kw in seen)


def test_a_frozen_parameter_is_neither_sent_nor_changed():
    """presto's freeze_encoder: parameters that do not learn stay out of the allreduce on every rank."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Linear(4, 3))
    net[0].requires_grad_(False)
    frozen = [p.clone() for p in net[0].parameters()]
    group = RecordingGroup(2.0)
    optimizer = AveragingOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), group, 2, False)
    net(torch.randn(8, 5)).square().sum().backward()
    optimizer.step()
    assert [numel for _, numel, _, _ in group.calls] == [sum(p.numel() for p in net[1].parameters())]
    assert all(torch.equal(a, b) for a, b in zip(frozen, net[0].parameters()))
    assert all(p.grad is None for p in net[0].parameters())
