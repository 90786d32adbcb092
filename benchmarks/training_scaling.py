"""Data-parallel LSTM training on this machine: 2 ranks against 1, and Horovod against PyTorch DDP.

The same worker (_dp_worker.py: model, data, per-worker batch, loop) runs bare (1 rank), under
horovodrun with 2 ranks on Horovod's Gloo controller and on its MPI controller (Open MPI, what
srun --mpi=pmix uses) both as shipped and with Open MPI's ``mpi_yield_when_idle`` (a rank waiting in MPI
spins a whole core by default, which on a machine whose cores all compute is taken from the training
threads), and under torchrun with 2 DDP (Gloo) ranks, one thread per rank. The variants
take turns, ``--repeat`` rounds: a shared 2-core machine is noisy, so each ratio is taken within a
round (variants run back to back under the same load) and the median over rounds is reported.
Prints steady-state samples/s, the scaling efficiency (2-rank rate / (2 x 1-rank rate)) and the
Horovod/DDP ratios.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from shared import demo_cube

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent


def run(launcher: list[str], backend: str, samples: list[str], extra_env: dict[str, str]) -> dict:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1", **extra_env}
    cmd = [*launcher, str(HERE / "_dp_worker.py"), "--backend", backend, "--samples", *samples]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    found = re.findall(r'\{"backend"[^}]*\}', out.stdout)  # launchers prefix lines with rank tags
    return json.loads(found[-1])


def main() -> None:
    import argparse
    import statistics

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    hvd = [str(BIN / "horovodrun"), "-np", "2", "-H", "localhost:2"]
    hvd_mpi = [*hvd, "--mpi", "--mpi-args=--allow-run-as-root --oversubscribe", sys.executable]
    ddp = "DDP Gloo, 2 ranks"
    variants = {
        "1 rank": ([sys.executable], "single", {}),
        "Horovod Gloo, 2 ranks": ([*hvd, "--gloo", sys.executable], "horovod", {}),
        "Horovod MPI, 2 ranks": (hvd_mpi, "horovod", {}),
        "Horovod MPI yield, 2 ranks": (hvd_mpi, "horovod", {"OMPI_MCA_mpi_yield_when_idle": "1"}),
        ddp: ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"], "ddp", {}),
    }
    rates: dict[str, list[float]] = {k: [] for k in variants}
    with tempfile.TemporaryDirectory() as tmp:
        samples = [str(demo_cube(Path(tmp), per_class=1500)[1])]  # the demo's 31UFT 2018
        for _ in range(args.repeat):
            for name, (launcher, backend, extra_env) in variants.items():
                rates[name].append(run(launcher, backend, samples, extra_env)["samples_per_s"])
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"LSTM (2 x 64, bidirectional), 128 samples per worker and step, 1 thread per rank, CPU; "
          f"median of {args.repeat} alternating rounds")
    for name, v in rates.items():
        print(f"  {name:27s} {med[name]:8.0f} samples/s  (runs: {', '.join(f'{r:.0f}' for r in v)})")

    def paired(num: str, den: str, scale: float = 1.0) -> str:
        ratios = [a / (scale * b) for a, b in zip(rates[num], rates[den])]
        return f"{statistics.median(ratios):.2f} (rounds: {', '.join(f'{r:.2f}' for r in ratios)})"

    two_ranks = [name for name in variants if name != "1 rank"]
    for name in two_ranks:
        print(f"  scaling efficiency {name:27s}: {paired(name, '1 rank', 2.0)}")
    for name in two_ranks:
        if name != ddp:
            print(f"  {name} / DDP: {paired(name, ddp)}")


if __name__ == "__main__":
    main()
