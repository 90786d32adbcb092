"""How lcflow's forest grows with its training rows, and what a whole-country run's forest weighs.

A forest grown until its leaves are pure (``min_samples_leaf: 1``) on labels that are partly wrong, as
CORINE's are on 10 m pixels, keeps small leaves around the wrong ones: its nodes grow almost as fast as its
rows. The demo's models train on a few thousand rows; the seed study (config/netherlands.yaml) trains on
over a million, and a map job holds the whole forest in memory.

Table: every labelled pixel of the demo's four tile-years (31UFT and 32ULC, 2018 and 2019: 260,668 of
their 262,144 px have a CORINE level-2 label; the synthetic truth beside them), prepared as lcflow
prepares a forest's input (gaps filled, standardised, an observed flag a step). The left quarter of every
tile-year (64 of its 256 columns) is the test block; training rows are drawn at random from the rest,
``--rows`` of them (``--per-class``: as many of each class as it has up to an equal share, as lcflow's
sampling draws ``sample.per_class``, the rest at random).
For each size and ``--leaf`` (min_samples_leaf), lcflow's forest (its defaults otherwise: 300 trees)
is fitted and the run prints: fit seconds, nodes, mean depth, the bytes the fitted forest holds (its
pickle) and its compiled arrays, the compiled map rate on the test block, and the test block's overall
and balanced accuracy against the labels and against the truth. Last, each leaf size's node count as a
power law of the rows, projected to the seed study's training rows, against the Slurm profile's memory
for a map job.

At the seed study's own size: ``--side 560 --years 2018,2019,2020`` makes the demo's tiles 560 px a side
over three years (1.9 M labelled px, 1.4 M outside the test blocks), enough for its 1,365,000 rows; a
forest of ``--trees 30`` is fitted on them (a tenth of the fit), and its map is timed with each of its
trees taken ten times: the nodes walked and the memory read of 300 trees of that size (``--check-copies``
times copies beside 300 fitted trees at the first size). The map rate is always that of 300 trees, the
median of three timings; the accuracy is that of the trees fitted.
With ``--tensors`` each map is also timed with the trees as torch tensors on the machine's GPU (the
GPU nodes' engine, ``predict_engine: tensors``), in turns with the compiled traversal on every core.
With ``--layouts``, other node layouts of the compiled traversal (_forest_layouts.py) too.
With ``--compare-block`` (256 by default) each map is also timed, in turns with lcflow's own, at a fixed
block of that many pixels (what the compiled traversal took before it sized its blocks by the cache),
and the two maps' probabilities are compared to the bit.
``--json`` writes the figures that ``seed_study.py`` reads (``--forest-figures``) for its forest maps.

Usage: python benchmarks/forest_size.py [--rows 6000,24000,96000] [--leaf 1,10,30] [--per-class]
       [--trees 300] [--side 256] [--years 2018,2019] [--json FILE] [--work DIR]
"""

import argparse
import copy
import json
import math
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shared import balanced, demo_pixels, draw, map_rate, seconds_in_turns  # noqa: E402

from lcflow.common.features import Standardiser, prepare  # noqa: E402
from lcflow.train.models import model_class  # noqa: E402
from lcflow.train.models.compiled_forest import block_rows  # noqa: E402

#: CLC level-2 classes a Dutch tile-year holds (seed_study.py's assumption)
SEED_CLASSES = 13


def as_300_trees(model, first: int | None = None):
    """``model`` with its forest's trees (its ``first`` trees) each taken 300 / trees times: the nodes a map
    walks and the memory it reads are those of a 300-tree forest of trees that size, though fewer were
    fitted (a copy; the fitted model is left as it is)."""
    estimators = list(model.forest.estimators_)[:first]
    if 300 % len(estimators):
        raise SystemExit(f"--trees {len(estimators)}: 300 is not a multiple of it")
    big = copy.copy(model)
    big.forest = copy.copy(model.forest)
    big.forest.estimators_ = estimators * (300 // len(estimators))
    big.forest.n_estimators = 300
    return big


def check_copies(model, params: dict, x_train: np.ndarray, index: np.ndarray, x_test: np.ndarray, rounds: int = 5) -> str:
    """How well copies stand in for fitted trees: the map rate of 300 trees fitted, of the first trees
    of those taken 300 / trees times, and of ``model``'s trees so taken, in turns, ``rounds`` times."""
    fitted = model_class("rf")({**params, "n_estimators": 300}, x_train.shape[2], x_train.shape[1], model.n_classes)
    fitted.fit(x_train, index, None, None)
    timed = {"300 fitted": fitted, "their first taken again": as_300_trees(fitted, len(model.forest.estimators_)),
             "these taken again": as_300_trees(model)}
    rates = {name: [] for name in timed}
    for _ in range(rounds):
        for name, one in timed.items():
            rates[name].append(map_rate(one, x_test, repeats=1))
    return ", ".join(f"{name} {np.median(r) / 1e3:.1f} k px/s" for name, r in rates.items())


def block_against(model, x: np.ndarray, block: int, rounds: int = 3) -> tuple[float, float, bool]:
    """Map rates of ``model``'s compiled forest at lcflow's block (``compiled_forest.block_rows``) and at
    ``block`` rows, in turns, ``rounds`` times (medians), after one run of each; and whether the two
    gave the same probabilities to the bit."""
    compiled, rows = model.compiled(), x.reshape(len(x), -1)
    chosen, other = compiled.predict_proba(rows), compiled.predict_proba(rows, block=block)
    spent = seconds_in_turns({"chosen": lambda: compiled.predict_proba(rows),
                              "other": lambda: compiled.predict_proba(rows, block=block)}, rounds)
    return (len(x) / float(np.median(spent["chosen"])), len(x) / float(np.median(spent["other"])),
            bool(np.array_equal(chosen, other)))


def tensors_against(model, x: np.ndarray, rounds: int = 3) -> dict:
    """The map rate of ``model``'s trees as torch tensors (``predict_engine: tensors``) on this machine's
    GPU (its CPU where there is none), in turns with the compiled traversal on every core, and whether the
    probabilities are identical."""
    import torch

    from lcflow.train.models.tensor_forest import TensorForest

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    compiled, rows = model.compiled(), x.reshape(len(x), -1)
    started = time.perf_counter()
    tensors = TensorForest(compiled, device)
    setup = time.perf_counter() - started
    same = bool(np.array_equal(tensors.predict_proba(rows), compiled.predict_proba(rows)))

    def on_tensors() -> None:
        tensors.predict_proba(rows)
        if device.type == "cuda":
            torch.cuda.synchronize()

    spent = seconds_in_turns({"compiled": lambda: compiled.predict_proba(rows), "tensors": on_tensors}, rounds)
    return {"tensors_device": device.type, "tensors_setup_s": setup, "same_tensors": same,
            "map_px_s_300_trees_tensors": len(x) / float(np.median(spent["tensors"])),
            "map_px_s_300_trees_compiled_beside": len(x) / float(np.median(spent["compiled"]))}


def seed_study_rows() -> int:
    """Training rows of the seed study: per_class x classes x tile-years x the train fraction."""
    seed = yaml.safe_load((ROOT / "config" / "netherlands.yaml").read_text())
    tile_years = len(seed["tiles"]) * len(seed["years"])
    return int(seed["sample"]["per_class"] * SEED_CLASSES * tile_years * seed["sample"]["fractions"]["train"])


def profile_mem_mb(rule: str) -> str:
    """The Slurm profile's memory request of ``rule`` (its first attempt)."""
    profile = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    return str(profile["set-resources"][rule]["mem_mb"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="6000,24000,96000", help="training rows, comma-separated")
    ap.add_argument("--leaf", default="1,10,30", help="min_samples_leaf values, comma-separated")
    ap.add_argument("--per-class", action="store_true", help="draw the training rows per class, as lcflow's sampling")
    ap.add_argument("--trees", type=int, default=300, help="trees fitted (a divisor of lcflow's default 300: the "
                    "map is timed on them each taken 300 / trees times)")
    ap.add_argument("--check-copies", action="store_true", help="with --trees under 300: at the first --rows and "
                    "--leaf, also fit 300 trees and time them beside copies (medians of 5 turns)")
    ap.add_argument("--years", default="2018,2019", help="the demo's years, comma-separated")
    ap.add_argument("--side", type=int, default=256, help="pixels a side of each demo tile's square (the demo's 256)")
    ap.add_argument("--compare-block", type=int, default=256, help="also time each map with this many pixels a "
                    "block (the compiled traversal's fixed block before it was sized by the cache), side by side; 0: not")
    ap.add_argument("--tensors", action="store_true", help="also time each map with the trees as torch tensors "
                    "(predict_engine: tensors) on the GPU if there is one, in turns with the compiled traversal")
    ap.add_argument("--layouts", action="store_true", help="also time other node layouts of the compiled traversal "
                    "(_forest_layouts.py) on each map, in turns with lcflow's")
    ap.add_argument("--json", type=Path, help="also write every fit's figures to this file")
    ap.add_argument("--work", type=Path, help="where the demo's cubes are made (and found again: keep one per "
                    "--side and --years)")
    args = ap.parse_args()
    sizes = [int(v) for v in args.rows.split(",")]
    leaves = [int(v) for v in args.leaf.split(",")]

    work = args.work or Path(tempfile.mkdtemp())
    series, label, truth, test, _ = demo_pixels(work, tuple(int(y) for y in args.years.split(",")), args.side)
    train_pool = np.random.default_rng(0).permutation(np.flatnonzero(~test))
    if max(sizes) > len(train_pool):
        raise SystemExit(f"--rows: at most {len(train_pool)} training rows outside the test block")
    counts = np.bincount(label[draw(train_pool, label, max(sizes), args.per_class)])
    print(f"training rows per class at {max(sizes)}: {', '.join(f'{c}: {k}' for c, k in enumerate(counts) if k)}")
    print(f"{len(label)} labelled px, {series.shape[1]} steps x {series.shape[2]} bands, {np.isnan(series).mean():.1%} "
          f"of the values missing; test block {int(test.sum())} px, whose labels are true for "
          f"{(label[test] == truth[test]).mean():.3f}", flush=True)

    rf = model_class("rf")
    fits = []
    for n in sizes:
        rows = draw(train_pool, label, n, args.per_class)
        standardise = Standardiser.fit(series[rows])
        x_train = prepare(series[rows], standardise)[0]
        x_test = prepare(series[test], standardise)[0]
        classes = np.unique(label[rows])
        index = np.searchsorted(classes, label[rows])
        for leaf in leaves:
            model = rf({"min_samples_leaf": leaf, "n_estimators": args.trees}, x_train.shape[2], x_train.shape[1],
                       len(classes))
            started = time.perf_counter()
            model.fit(x_train, index, None, None)
            fit_s = time.perf_counter() - started
            size = model.size()
            nodes, depth = size["nodes"], size["mean_depth"]
            held = len(pickle.dumps(model.forest, protocol=5))
            compiled = model.compiled()
            compiled_bytes = sum(a.nbytes for a in vars(compiled).values() if isinstance(a, np.ndarray))
            codes = classes[model.predict_proba(x_test).argmax(1)]
            big = as_300_trees(model)
            if args.compare_block:
                rate, rate_other, same = block_against(big, x_test, args.compare_block)
                at_other = {"map_px_s_300_trees_other_block": rate_other, "other_block": args.compare_block,
                            "same_at_other_block": same}
            else:
                rate, at_other = map_rate(big, x_test), {}
            if args.tensors:
                at_other.update(tensors_against(big, x_test))
            if args.layouts:
                from _forest_layouts import layouts_against

                at_other["layouts"] = layouts = layouts_against(big.compiled(), x_test)
            oa, oa_truth = float((codes == label[test]).mean()), float((codes == truth[test]).mean())
            bal, bal_truth = balanced(codes, label[test]), balanced(codes, truth[test])
            fits.append({"rows": n, "leaf": leaf, "trees": args.trees, "nodes": nodes, "mean_depth": depth,
                         "held_mb": size["held_mb"], "bytes": held, "compiled": compiled_bytes, "fit_s": fit_s,
                         "map_px_s_300_trees": rate, "cores": len(os.sched_getaffinity(0)), "oa": oa,
                         "oa_truth": oa_truth, "balanced": bal, "balanced_truth": bal_truth, **at_other})
            as_300 = f" (its trees each taken {300 // args.trees} times)" if args.trees != 300 else ""
            print(f"rows {n:7d} leaf {leaf:3d}: fit {fit_s:7.1f} s, {nodes:10d} nodes ({nodes / args.trees / n:.3f} a "
                  f"row a tree), depth {depth:5.1f}, held {held / 1e6:8.1f} MB ({held / nodes:.0f} B a node), compiled "
                  f"{compiled_bytes / 1e6:7.1f} MB, map as 300 trees {rate / 1e3:6.1f} k px/s{as_300}, test OA {oa:.4f} "
                  f"(truth {oa_truth:.4f}), balanced {bal:.4f} (truth {bal_truth:.4f})", flush=True)
            if args.compare_block:
                print(f"  side by side: lcflow's block {block_rows(len(x_test), x_test[0].size, len(os.sched_getaffinity(0)))} "
                      f"px {rate / 1e3:.1f} k px/s, {args.compare_block} px {rate_other / 1e3:.1f} k px/s: "
                      f"{rate / rate_other:.2f}x, probabilities {'identical' if same else 'DIFFERENT'}", flush=True)
            if args.tensors:
                t = at_other
                print(f"  trees as tensors on the {t['tensors_device']} (set up in {t['tensors_setup_s']:.1f} s): "
                      f"{t['map_px_s_300_trees_tensors'] / 1e3:.1f} k px/s against the compiled traversal's "
                      f"{t['map_px_s_300_trees_compiled_beside'] / 1e3:.1f} k px/s on {len(os.sched_getaffinity(0))} "
                      f"cores: {t['map_px_s_300_trees_tensors'] / t['map_px_s_300_trees_compiled_beside']:.2f}x, "
                      f"probabilities {'identical' if t['same_tensors'] else 'DIFFERENT'}", flush=True)
            if args.layouts:
                print(f"  node layouts at a block of {layouts['block']} px (px/s medians; ratios to lcflow's by round): "
                      + "; ".join(f"{name} {rate / 1e3:.1f} k ({' '.join(f'{r:.2f}' for r in layouts['ratios_by_round'][name])}"
                                  f"{', same probabilities' if layouts['same'][name] else ', DIFFERENT'})"
                                  for name, rate in layouts["px_s"].items()), flush=True)
                print(f"  a pixel goes {layouts['mean_steps']:.1f} steps down a tree in lockstep, to a leaf at depth "
                      f"{layouts['mean_leaf_depth']:.1f} on average", flush=True)
            if args.check_copies and args.trees < 300 and (n, leaf) == (sizes[0], leaves[0]):
                print(f"  copies against fitted trees, map as 300 trees: "
                      f"{check_copies(model, {'min_samples_leaf': leaf}, x_train, index, x_test)}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"table": {"years": args.years, "side": args.side, "labelled_px": len(label),
                                                   "per_class": args.per_class}, "fits": fits}, indent=1))

    target = seed_study_rows()
    print(f"\nseed study (config/netherlands.yaml): {target:,} training rows ({SEED_CLASSES} classes assumed); "
          f"Slurm profile: train_rf mem_mb {profile_mem_mb('train_rf')}, "
          f"predict_rf mem_mb {profile_mem_mb('predict_rf')}")
    for leaf in leaves:
        own = [f for f in fits if f["leaf"] == leaf]
        if len(own) < 2:
            continue
        slope, intercept = np.polyfit(np.log([f["rows"] for f in own]), np.log([f["nodes"] for f in own]), 1)
        nodes = math.exp(intercept) * target ** slope * 300 / args.trees
        per_node = own[-1]["held_mb"] * 1e6 / own[-1]["nodes"]  # the trees' own arrays (the pickle adds OOB rows)
        # scikit-learn keeps a float64 a class a node
        per_node_13 = per_node + 8 * (SEED_CLASSES - len(np.unique(label)))
        compiled_per_node = own[-1]["compiled"] / own[-1]["nodes"]
        print(f"  leaf {leaf:3d}: nodes ~ rows^{slope:.2f}: {nodes / 1e6:6.1f} M nodes, "
              f"held {nodes * per_node_13 / 1e9:5.1f} GB + compiled {nodes * compiled_per_node / 1e9:4.1f} GB in a map job")


if __name__ == "__main__":
    main()
