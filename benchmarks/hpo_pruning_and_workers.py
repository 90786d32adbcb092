"""Does pruning pay, do parallel workers pay? The same LSTM study, timed side by side in one run.

The table is a field-like subset of the real Slovenia NDVI patch (500 rows, imbalanced, gappy; 68
irregular dates), its val rows carved from train as ``lcflow tune`` does. Every study runs
``lcflow tune`` processes with one torch thread each, on the same budget and seed, the model's default
space, trials of 300 steps in 15 rounds (no early stop, so only the pruner shortens a trial):
- pruning: successive halving (ASHA) against no pruning, one worker each: wall time to finish the
  study and the best validation accuracy reached (ratio and difference);
- workers: 2 workers started together against 1, no pruning (so every trial costs the same): wall-time
  ratio on the same budget.
Printed as a table; nothing is asserted (figures for docs/benchmarks.md).

Usage: python benchmarks/hpo_pruning_and_workers.py [--trials 12] [--model lstm]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lcflow.labels import samples_table as samples  # noqa: E402
from lcflow.tune import study as studies  # noqa: E402
from tests import real_tables  # noqa: E402

BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
#: trials of 300 steps in 15 validation rounds: a study of 10 trials takes minutes on 2 cores
FIXED = ["--set", "min_steps=300", "--set", "evaluations=15", "--set", "patience=15"]


def table(work: Path) -> Path:
    frame, meta = real_tables.slovenia()
    subset = real_tables.field_like(frame, 500, seed=0)
    (split,) = list(real_tables.spatial_folds(subset, 5, 100.0, seed=0))[:1]
    path = work / "slovenia500.parquet"
    samples.write(split, path, meta)
    return path


def study(path: Path, work: Path, name: str, model: str, trials: int, workers: int, pruner: str) -> dict:
    """One study: ``workers`` lcflow tune processes started together; wall time and best value."""
    study_dir = work / name
    cmd = [str(BIN / "lcflow"), "tune", "--model", model, "--samples", str(path), "--study", str(study_dir),
           "--trials", str(trials), "--pruner", pruner, "--seed", "0", "--set", "threads=1", *FIXED]
    started = time.perf_counter()
    procs = [subprocess.Popen([*cmd, "--worker", f"w{i}"], env=ENV, stdout=subprocess.DEVNULL,
                              stderr=(work / f"{name}_{i}.log").open("w")) for i in range(workers)]
    codes = [p.wait() for p in procs]
    wall = time.perf_counter() - started
    if any(codes):
        raise SystemExit(f"{name}: a worker failed; see {work}/{name}_*.log")
    s = studies.load_study(study_dir)
    c = studies.counts(s)
    return {"study": name, "workers": workers, "pruner": pruner, "wall_s": wall, "best_val": s.best_value,
            "complete": c["complete"], "pruned": c["pruned"],
            "rounds": sum(len(t.intermediate_values) for t in s.trials)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--model", default="lstm", choices=("lstm", "tempcnn"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        path = table(work)
        runs = []
        for name, workers, pruner in (("asha", 1, "successive_halving"), ("no_pruning", 1, "none"),
                                      ("two_workers", 2, "none")):
            runs.append(study(path, work, name, args.model, args.trials, workers, pruner))
            print(json.dumps(runs[-1]), flush=True)  # each study as it ends: a run cut short keeps those done
    asha, full, two = runs
    print()
    print(f"{'study':<14}{'workers':>8}{'pruner':>20}{'wall s':>9}{'best val':>10}{'complete':>10}{'pruned':>8}"
          f"{'rounds':>8}")
    for r in runs:
        print(f"{r['study']:<14}{r['workers']:>8}{r['pruner']:>20}{r['wall_s']:>9.0f}{r['best_val']:>10.4f}"
              f"{r['complete']:>10}{r['pruned']:>8}{r['rounds']:>8}")
    print(f"\npruning: wall time x{asha['wall_s'] / full['wall_s']:.2f} of no pruning, best val "
          f"{asha['best_val'] - full['best_val']:+.4f}; validation rounds trained x{asha['rounds'] / full['rounds']:.2f}")
    print(f"workers: 2 workers finish the same budget in x{two['wall_s'] / full['wall_s']:.2f} of the wall time of 1")


if __name__ == "__main__":
    main()
