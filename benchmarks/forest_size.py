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

Usage: python benchmarks/forest_size.py [--rows 6000,24000,96000] [--leaf 1,10,30] [--per-class] [--work DIR]
"""

import argparse
import math
import pickle
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lcflow.common.features import Standardiser, prepare  # noqa: E402
from lcflow.labels import alignment as labels, nomenclature  # noqa: E402
from lcflow.retrieve import cube, search  # noqa: E402
from lcflow.synth.demo import make_demo  # noqa: E402
from lcflow.train.models import model_class  # noqa: E402

from models_on_small_tables import BANDS, DEMO_AOI  # noqa: E402  (the same demo tile-years and bands)

YEARS = (2018, 2019)
TEST_COLUMNS = 64
#: CLC level-2 classes a Dutch tile-year holds (seed_study.py's assumption)
SEED_CLASSES = 13


def demo_pixels(work: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Series (pixels, steps, bands) with NaN gaps, CORINE level-2 labels, true classes and the test-block
    flag of every labelled pixel of the demo's tile-years."""
    level2 = nomenclature.clc_level(2)
    if not all((work / tile / "labels.tif").exists() for tile in DEMO_AOI):
        make_demo(work / "demo", DEMO_AOI, list(YEARS))
    xs, ys, truths, tests = [], [], [], []
    for tile, bounds in DEMO_AOI.items():
        for year in YEARS:
            d = work / tile / str(year)
            if not (d / "cube.tif").exists():
                search.run(tile, year, d / "items.json", catalog=str(work / "demo" / "catalog" / "catalog.json"))
                cube.run(d / "items.json", tile, year, d / "cube.tif", d / "valid.tif", bands=BANDS, bounds=bounds)
        if not (work / tile / "labels.tif").exists():
            labels.run(work / "demo" / "corine" / "clc_demo_3035.tif", work / tile / str(YEARS[0]) / "cube.tif",
                       work / tile / "labels.tif", level2)
        with rasterio.open(work / tile / "labels.tif") as src:
            label = src.read(1).ravel()
            width, nodata = src.width, src.nodata
        for year in YEARS:
            with rasterio.open(work / tile / str(year) / "cube.tif") as src:
                raw = src.read()
                values = raw.reshape(src.count, -1).T.astype(np.float32)
                values[raw.reshape(src.count, -1).T == src.nodata] = np.nan
            with rasterio.open(work / "demo" / "truth" / f"{tile}_{year}.tif") as src:
                truth = level2.apply(src.read(1).ravel())
            keep = (label > 0) & (label != nodata)  # no CORINE class there
            xs.append(values[keep].reshape(int(keep.sum()), -1, len(BANDS)))
            ys.append(label[keep])
            truths.append(truth[keep])
            tests.append((np.arange(label.size) % width < TEST_COLUMNS)[keep])
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(truths), np.concatenate(tests)


def draw(pool: np.ndarray, label: np.ndarray, n: int, per_class: bool) -> np.ndarray:
    """``n`` rows of ``pool`` (shuffled already): its first ``n``, or with ``per_class`` up to n / classes of
    each class and the rest from what is left, in the pool's order."""
    if not per_class:
        return pool[:n]
    classes = np.unique(label[pool])
    share = n // len(classes)
    taken = np.concatenate([pool[label[pool] == c][:share] for c in classes])
    return np.concatenate([taken, pool[~np.isin(pool, taken)][:n - len(taken)]])


def balanced(codes: np.ndarray, true: np.ndarray) -> float:
    """The mean of the classes' recalls (the classes present in ``true``)."""
    return float(np.mean([(codes[true == c] == c).mean() for c in np.unique(true)]))


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
    ap.add_argument("--work", type=Path, help="where the demo's cubes are made (and found again)")
    args = ap.parse_args()
    sizes = [int(v) for v in args.rows.split(",")]
    leaves = [int(v) for v in args.leaf.split(",")]

    work = args.work or Path(tempfile.mkdtemp())
    series, label, truth, test = demo_pixels(work)
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
            model = rf({"min_samples_leaf": leaf}, x_train.shape[2], x_train.shape[1], len(classes))
            started = time.perf_counter()
            model.fit(x_train, index, None, None)
            fit_s = time.perf_counter() - started
            size = model.size()
            nodes, depth = size["nodes"], size["mean_depth"]
            held = len(pickle.dumps(model.forest, protocol=5))
            compiled = model.compiled()
            compiled_bytes = sum(a.nbytes for a in vars(compiled).values() if isinstance(a, np.ndarray))
            model.predict_proba(x_test[:4096])  # compiled once before the clock starts
            started = time.perf_counter()
            codes = classes[model.predict_proba(x_test).argmax(1)]
            rate = len(x_test) / (time.perf_counter() - started)
            oa, oa_truth = float((codes == label[test]).mean()), float((codes == truth[test]).mean())
            bal, bal_truth = balanced(codes, label[test]), balanced(codes, truth[test])
            fits.append({"rows": n, "leaf": leaf, "nodes": nodes, "bytes": held, "compiled": compiled_bytes})
            print(f"rows {n:7d} leaf {leaf:3d}: fit {fit_s:7.1f} s, {nodes:10d} nodes ({nodes / 300 / n:.3f} a row "
                  f"a tree), depth {depth:5.1f}, held {held / 1e6:8.1f} MB ({held / nodes:.0f} B a node), compiled "
                  f"{compiled_bytes / 1e6:7.1f} MB, map {rate / 1e3:6.1f} k px/s, test OA {oa:.4f} "
                  f"(truth {oa_truth:.4f}), balanced {bal:.4f} (truth {bal_truth:.4f})", flush=True)

    target = seed_study_rows()
    print(f"\nseed study (config/netherlands.yaml): {target:,} training rows ({SEED_CLASSES} classes assumed); "
          f"Slurm profile: train_rf mem_mb {profile_mem_mb('train_rf')}, "
          f"predict_rf mem_mb {profile_mem_mb('predict_rf')}")
    for leaf in leaves:
        own = [f for f in fits if f["leaf"] == leaf]
        if len(own) < 2:
            continue
        slope, intercept = np.polyfit(np.log([f["rows"] for f in own]), np.log([f["nodes"] for f in own]), 1)
        nodes = math.exp(intercept) * target ** slope
        per_node = own[-1]["bytes"] / own[-1]["nodes"]
        # scikit-learn keeps a float64 a class a node
        per_node_13 = per_node + 8 * (SEED_CLASSES - len(np.unique(label)))
        compiled_per_node = own[-1]["compiled"] / own[-1]["nodes"]
        print(f"  leaf {leaf:3d}: nodes ~ rows^{slope:.2f}: {nodes / 1e6:6.1f} M nodes, "
              f"held {nodes * per_node_13 / 1e9:5.1f} GB + compiled {nodes * compiled_per_node / 1e9:4.1f} GB in a map job")


if __name__ == "__main__":
    main()
