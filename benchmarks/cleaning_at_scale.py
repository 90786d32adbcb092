"""What label cleaning (``sample.clean``) costs on a large tile-year, and what its per-tree row cap
(``sample.clean.tree_rows``) changes in the samples it drops.

Cleaning judges a tile-year's train and val candidates with five out-of-fold forests of 200 trees
(folds by spatial block). A country-wide study draws ``per_class`` 5000 samples, 1.5 times as many
candidates, of some 13 classes: about 80,000 judged rows a tile-year, where a fully grown tree's nodes grow
almost as fast as its rows (forest_size.py). Capped, each tree grows on at most ``tree_rows`` rows drawn
from its fold's.

Table: every labelled pixel of the demo's tile-years as forest_size.py builds it, with the synthetic truth
beside the CORINE labels, and the spatial blocks training gives them. ``--rows`` candidates are drawn per
class (as sampling draws them) from outside the test block; for each of ``--caps`` (0: no cap) they are
cleaned as ``lcflow sample`` cleans them (:func:`lcflow.labels.cleaning.noisy`, its defaults but the cap),
and the run prints the seconds and each fold's forest (from cleaning's own log lines), the rows dropped,
how many of them had a wrong label (against the truth: the precision of the drop) and what share of the
wrong labels were dropped (its recall), how often the kept rows' labels are true, and how far the drop
differs from the uncapped one (rows dropped by one and not the other). With ``--score``, lcflow's forest
(its defaults) is trained on each set of kept rows and scored on the test block against the labels and
the truth, as a model trained on them would map.

Usage: python benchmarks/cleaning_at_scale.py [--rows 96000] [--caps 0,25000,50000] [--side 256]
       [--years 2018,2019] [--score] [--work DIR]
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

from shared import balanced, demo_pixels, draw, peak_mb  # noqa: E402

from lcflow.common.features import Standardiser, prepare  # noqa: E402
from lcflow.labels import cleaning  # noqa: E402
from lcflow.labels.sample_settings import CleanSettings  # noqa: E402
from lcflow.train.models import hyperparameters, model_class  # noqa: E402


def forest_scores(series: np.ndarray, label: np.ndarray, truth: np.ndarray, train: np.ndarray,
                  test: np.ndarray) -> str:
    """lcflow's forest at its defaults on the ``train`` rows: its test-block accuracy against the labels and
    the truth, and its balanced accuracy against the truth."""
    standardise = Standardiser.fit(series[train])
    x_train, _ = prepare(series[train], standardise)
    x_test, _ = prepare(series[test], standardise)
    classes = np.unique(label[train])
    forest = model_class("rf")(hyperparameters.check("rf", {}), x_train.shape[2], x_train.shape[1], classes.size)
    forest.fit(x_train, np.searchsorted(classes, label[train]), None, None)
    codes = classes[forest.predict_proba(x_test).argmax(1)]
    return (f"forest on the kept rows: test block {(codes == label[test]).mean():.4f} against the labels, "
            f"{(codes == truth[test]).mean():.4f} against the truth ({balanced(codes, truth[test]):.4f} balanced)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="96000", help="judged candidates, comma-separated")
    ap.add_argument("--caps", default="0,25000,50000", help="rows a tree grows on at most, comma-separated (0: no cap)")
    ap.add_argument("--years", default="2018,2019", help="the demo's years, comma-separated")
    ap.add_argument("--side", type=int, default=256, help="pixels a side of each demo tile's square")
    ap.add_argument("--score", action="store_true", help="train lcflow's forest on each set of kept rows and score it")
    ap.add_argument("--work", type=Path, help="where the demo's cubes are made (and found again)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="    %(message)s", stream=sys.stdout)

    work = args.work or Path(tempfile.mkdtemp())
    series, label, truth, test, blocks = demo_pixels(work, tuple(int(y) for y in args.years.split(",")), args.side)
    pool = np.random.default_rng(0).permutation(np.flatnonzero(~test))
    test_rows = np.flatnonzero(test)
    print(f"{len(label)} labelled px, {int((~test).sum())} outside the test block, {test_rows.size} in it", flush=True)
    for n in (int(v) for v in args.rows.split(",")):
        if n > len(pool):
            raise SystemExit(f"--rows {n}: at most {len(pool)} candidates outside the test block")
        rows = draw(pool, label, n, per_class=True)
        x, y, true = cleaning.forest_rows(series[rows]), label[rows], truth[rows]
        wrong = y != true
        print(f"rows {n}: {np.unique(y).size} classes, labels true for {1 - wrong.mean():.4f}", flush=True)
        if args.score:
            print(f"rows {n} as drawn: {forest_scores(series, label, truth, rows, test_rows)}", flush=True)
        reference = None
        for cap in (int(v) for v in args.caps.split(",")):
            judge = cleaning.Cleaning(CleanSettings(tree_rows=cap or None))
            started = time.perf_counter()
            drop = cleaning.noisy(x, y, blocks[rows], judge, f"rows {n} cap {cap or 'none'}")
            spent = time.perf_counter() - started
            reference = drop if reference is None else reference
            kept = ~drop
            print(f"rows {n} cap {cap or 'none':>6}: {spent:6.1f} s, peak memory {peak_mb():.0f} MB; drops {int(drop.sum())} "
                  f"({drop.mean():.4f}), of which wrong {(wrong[drop].mean() if drop.any() else 0):.4f} (precision), "
                  f"{(drop[wrong].mean() if wrong.any() else 0):.4f} of the wrong labels (recall); kept labels true "
                  f"for {1 - wrong[kept].mean():.4f}; against the first cap's drop: {int((drop & ~reference).sum())} "
                  f"more, {int((reference & ~drop).sum())} fewer", flush=True)
            if args.score:
                print(f"rows {n} cap {cap or 'none':>6}: {forest_scores(series, label, truth, rows[kept], test_rows)}",
                      flush=True)


if __name__ == "__main__":
    main()
