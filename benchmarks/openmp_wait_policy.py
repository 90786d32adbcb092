"""OpenMP's wait policy for lcflow's torch threads: spinning (the default) against sleeping (PASSIVE), with
the job's cores to itself and with other busy processes beside it.

A thread of torch's OpenMP pool that waits for the others spins before it sleeps. With its cores to
itself that saves the wake-up; where the cores are shared (several jobs on a laptop's few cores, an
oversubscribed node, a test suite in several processes) the spinning thread takes the core that the
thread it waits for needs. The same LSTM training (``lcflow train``, 2 threads, 3 rounds, the demo's
31UFT 2018 samples) runs under each policy, alone and beside ``--busy`` processes that only loop; the
variants take turns, ``--repeat`` rounds, and each prints its median wall time and CPU time (user +
system of the training process and its threads).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shared import demo_cube

BIN = Path(sys.executable).parent


def train(samples: Path, out: Path, policy: str | None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one training under ``policy`` (None: OpenMP's default)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    cmd = [str(BIN / "lcflow"), "train", "--model", "lstm", "--samples", str(samples), "--out", str(out),
           "--set", "epochs=3", "--set", "min_steps=0", "--set", "threads=2"]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (policy {policy or 'default'})")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--busy", type=int, default=2, help="busy processes beside the training in the shared case")
    args = ap.parse_args()
    variants = [(load, policy) for load in ("alone", "shared") for policy in (None, "PASSIVE")]
    times: dict[tuple, list[tuple[float, float]]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as tmp:
        _, samples = demo_cube(Path(tmp))
        for _ in range(args.repeat):
            for load, policy in variants:
                busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                        for _ in range(args.busy if load == "shared" else 0)]
                try:
                    times[(load, policy)].append(train(samples, Path(tmp) / "lstm", policy))
                finally:
                    for p in busy:
                        p.kill()
                        p.wait()
    print(f"LSTM training, 2 threads, 3 rounds, {os.cpu_count()} cores; 'shared': beside {args.busy} busy processes;"
          f" median of {args.repeat} (each run: wall s / CPU s)")
    for load, policy in variants:
        runs = times[(load, policy)]
        print(f"  {load:6s} {policy or 'default':8s} wall {statistics.median(w for w, _ in runs):7.1f} s  "
              f"CPU {statistics.median(c for _, c in runs):7.1f} s   runs: "
              + ", ".join(f"{w:.1f}/{c:.1f}" for w, c in runs))
    for load in ("alone", "shared"):
        wall = [p[0] / d[0] for d, p in zip(times[(load, None)], times[(load, "PASSIVE")])]
        cpu = [p[1] / d[1] for d, p in zip(times[(load, None)], times[(load, "PASSIVE")])]
        print(f"  {load}: PASSIVE / default, median of the rounds' ratios: wall {statistics.median(wall):.2f}, "
              f"CPU {statistics.median(cpu):.2f}")


if __name__ == "__main__":
    main()
