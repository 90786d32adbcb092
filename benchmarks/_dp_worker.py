"""One data-parallel worker for the scaling benchmark: the same LSTM, data and loop, Horovod or DDP.

Prints one JSON line (rank 0): steady-state samples per second over all ranks, epochs after the first.
"""

import argparse
import json
import time

import numpy as np
import torch
from torch import nn

from lcflow.common.features import Standardiser, prepare
from lcflow.labels import samples_table as samples_table
from lcflow.train.models.lstm import Network


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["single", "horovod", "ddp"], required=True)
    ap.add_argument("--samples", nargs="+", required=True)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=128, help="per worker")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.backend == "horovod":
        import horovod.torch as hvd

        hvd.init()
        rank, size = hvd.rank(), hvd.size()
    elif args.backend == "ddp":
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank, size = dist.get_rank(), dist.get_world_size()
    else:
        rank, size = 0, 1
    table = samples_table.read(args.samples)
    classes = table.classes
    raw = table.features()
    x, _ = prepare(raw, Standardiser.fit(raw))
    y = table.frame["label"].map({c: i for i, c in enumerate(classes)}).to_numpy()
    shard = np.random.default_rng(0).permutation(len(x))[rank::size]
    xt, yt = torch.from_numpy(x[shard]), torch.from_numpy(y[shard].astype(np.int64))
    torch.manual_seed(0)
    net = Network(x.shape[2], len(classes), 64, 2, True, 0.2)
    opt = torch.optim.AdamW(net.parameters(), lr=0.003)
    if args.backend == "horovod":
        hvd.broadcast_parameters(net.state_dict(), root_rank=0)
        opt = hvd.DistributedOptimizer(opt, named_parameters=net.named_parameters())
    elif args.backend == "ddp":
        net = nn.parallel.DistributedDataParallel(net)
    loss_fn = nn.CrossEntropyLoss()
    steps = max(1, -(-len(x) // (args.batch * size)))
    rates = []
    for epoch in range(args.epochs):
        start, seen = time.perf_counter(), 0
        for batch in np.array_split(np.random.default_rng(epoch).permutation(len(shard)), steps):
            idx = torch.from_numpy(batch)
            loss = loss_fn(net(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += len(batch)
        if epoch > 0:
            rates.append(seen * size / (time.perf_counter() - start))
    if rank == 0:
        print(json.dumps({"backend": args.backend, "ranks": size, "samples_per_s": float(np.mean(rates))}), flush=True)
    if args.backend == "ddp":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
