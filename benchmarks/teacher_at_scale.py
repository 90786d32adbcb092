"""What a deep model's forest teacher (``distill``) costs on a large table, and what its per-tree row
cap (``forest_teacher.TEACHER_TREE_ROWS``) changes in its probabilities.

The teacher fits five forests of 200 trees (out-of-fold, folds by spatial block) on the training rows.
Fully grown on every row of a fold, a tree's nodes grow almost as fast as its rows (forest_size.py), so
at the seed study's 1.37 M rows a fold would take hours of CPU and gigabytes; each tree therefore grows
on at most ``TEACHER_TREE_ROWS`` rows drawn from its fold's.

Table: every labelled pixel of the demo's tile-years as forest_size.py builds it (``--side 560 --years
2018,2019,2020`` for the seed study's size), prepared as lcflow prepares a deep model's input (gaps
filled, standardised, an observed flag a step), training rows drawn per class outside the test block,
with the spatial blocks training gives them. For each ``--rows`` and ``--caps`` (0: no cap, every tree
on a bootstrap sample of its fold's rows) the teacher's probabilities are computed as training computes
them, and the run prints the seconds, each fold's forest (nodes, MB: from the teacher's own log lines),
the process's peak memory, and how often the teacher's likeliest class is the row's label and its true
class (the demo's truth), on the rows held out by the folds fitted. ``--trees`` fits fewer trees and
``--share K`` only the folds a rank of K fits (fold 0, K, ...), as one rank of a training job does;
their seconds are also given projected to the teacher's whole fit (all folds, 200 trees).

Usage: python benchmarks/teacher_at_scale.py [--rows 96000] [--caps 0,25000,50000] [--trees 200]
       [--share 1] [--side 256] [--years 2018,2019] [--work DIR]
"""

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shared import demo_pixels, draw, peak_mb  # noqa: E402

from lcflow.common.features import Standardiser, prepare  # noqa: E402
from lcflow.train.data import forest_teacher  # noqa: E402
from lcflow.train.parallel.distributed import Single  # noqa: E402


class FirstRank(Single):
    """Rank 0 of ``size`` ranks, alone: it fits that rank's share of the folds, and its sum over the ranks
    is its own part (Single's: the other ranks' rows stay 0)."""

    def __init__(self, size: int):
        self.size = size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="96000", help="training rows, comma-separated")
    ap.add_argument("--caps", default="0,25000,50000",
                    help="rows a tree grows on at most, comma-separated (0: no cap)")
    ap.add_argument("--trees", type=int, default=forest_teacher.TEACHER_TREES, help="trees a fold's forest has")
    ap.add_argument("--share", type=int, default=1, help="fit the folds rank 0 of this many ranks fits")
    ap.add_argument("--years", default="2018,2019", help="the demo's years, comma-separated")
    ap.add_argument("--side", type=int, default=256, help="pixels a side of each demo tile's square")
    ap.add_argument("--work", type=Path, help="where the demo's cubes are made (and found again)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="    %(message)s", stream=sys.stdout)
    whole = forest_teacher.TEACHER_TREES
    forest_teacher.TEACHER_TREES = args.trees

    work = args.work or Path(tempfile.mkdtemp())
    series, label, truth, test, blocks = demo_pixels(work, tuple(int(y) for y in args.years.split(",")), args.side)
    pool = np.random.default_rng(0).permutation(np.flatnonzero(~test))
    print(f"{len(label)} labelled px, {int((~test).sum())} outside the test block; {args.trees} trees a fold"
          f"{f', the folds rank 0 of {args.share} fits' if args.share > 1 else ''}", flush=True)
    for n in (int(v) for v in args.rows.split(",")):
        if n > len(pool):
            raise SystemExit(f"--rows {n}: at most {len(pool)} training rows outside the test block")
        rows = draw(pool, label, n, per_class=True)
        x = prepare(series[rows], Standardiser.fit(series[rows]))[0]
        classes = np.unique(label[rows])
        y = np.searchsorted(classes, label[rows])
        for cap in (int(v) for v in args.caps.split(",")):
            forest_teacher.TEACHER_TREE_ROWS = cap or None
            teacher = forest_teacher.ForestTeacher(x, y, blocks[rows], len(classes))
            print(f"rows {n} cap {cap or 'none'}:", flush=True)
            started = time.perf_counter()
            proba, folds = teacher.probabilities(0, comm=FirstRank(args.share))
            spent = time.perf_counter() - started
            held = proba.sum(1) > 0
            likeliest = classes[proba[held].argmax(1)]
            fitted = len(range(0, folds, args.share))
            whole_s = spent * folds / fitted * whole / args.trees
            print(f"rows {n} cap {cap or 'none':>6}: {spent:7.1f} s for {fitted} of {folds} folds x {args.trees} "
                  f"trees (the whole teacher {whole_s:7.0f} s), peak memory {peak_mb():.0f} MB; on its {int(held.sum())} "
                  f"held-out rows the likeliest class is the label for {(likeliest == label[rows][held]).mean():.4f}, "
                  f"the truth for {(likeliest == truth[rows][held]).mean():.4f} (the labels are true for "
                  f"{(label[rows][held] == truth[rows][held]).mean():.4f})", flush=True)



if __name__ == "__main__":
    main()
