"""What Presto's pretraining buys: with 10 %, 30 % and 100 % of the training rows, presto fine-tuned from
the published encoder against the same network from random weights (``pretrained=false``) and against
lcflow's forest, on spatially blocked folds of the real Slovenia table and of the demo's samples.

Cases:
- slovenia: the eo-learn Slovenia patch (tests/real_tables.py), every labelled pixel, 68 irregular NDVI
  dates (averaged into 12 months for presto: NDVI is the one channel group it gets), 100 m blocks;
- demo: the demo's 31UFT 2018 samples (10 bands, 12 steps), 320 m blocks.
Variants (``--variants``): rf, presto, presto random init, and presto undated (the table's dates left out,
its steps then taken as equal parts of one year, as lcflow did before it read them).
A fraction keeps that share of each fold's train rows (stratified, the same rows for every model); the test
rows stay whole. Both presto variants get the same training budget (``--epochs``, ``--min-steps``; the
defaults are a CPU's budget, shorter than the recipe's 40 epochs and 1000 steps at least).

Usage: python benchmarks/studies/presto_pretraining.py [--cases slovenia,demo] [--folds 5] [--run-folds N]
       [--fractions 0.1,0.3,1] [--epochs 10] [--min-steps 300] [--variants rf,presto,presto random init]
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # shared.py

from lcflow.labels import samples_table as samples  # noqa: E402
from lcflow.train import training  # noqa: E402
from tests import real_tables  # noqa: E402

#: label -> model, its parameters, whether it gets the table's dates
VARIANTS = {"rf": ("rf", {}, True), "presto": ("presto", {}, True),
            "presto random init": ("presto", {"pretrained": False}, True), "presto undated": ("presto", {}, False)}


def subset(table: pd.DataFrame, fraction: float, seed: int) -> pd.DataFrame:
    """The test rows and ``fraction`` of each class's train rows."""
    if fraction >= 1:
        return table
    train = table[table["split"] == "train"]
    kept = [part.sample(n=max(2, round(fraction * len(part))), random_state=seed) for _, part in train.groupby("label")]
    return pd.concat([*kept, table[table["split"] == "test"]], ignore_index=True)


def run_case(name: str, frame: pd.DataFrame, meta: dict, block_m: float, args, work: Path) -> list[dict]:
    rows = []
    deep = {"epochs": args.epochs, "min_steps": args.min_steps, "threads": 2}
    for k, table in enumerate(real_tables.spatial_folds(frame, args.folds, block_m, seed=0)):
        if k >= args.run_folds:
            break
        for fraction in args.fractions:
            part = subset(table, fraction, seed=k)
            path = work / f"{name}_{k}_{fraction}.parquet"
            samples.write(part, path, meta)
            undated = path.with_name(path.stem + "_undated.parquet")
            if not all(VARIANTS[label][2] for label in args.variants):  # a variant without the dates runs
                samples.write(part, undated, {key: v for key, v in meta.items() if key != "time_steps"})
            row = {"case": name, "fold": k, "fraction": fraction, "n_train": int((part["split"] == "train").sum())}
            for label in args.variants:
                model, params, dated = VARIANTS[label]
                started = time.perf_counter()
                metrics = training.train(model, [str(path if dated else undated)], work / f"{name}_{k}_{fraction}_{label}",
                                         {**(deep if model != "rf" else {}), **params})
                row |= {label: metrics["test"]["overall_accuracy"], f"{label} s": round(time.perf_counter() - started, 1)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def summary(rows: list[dict], variants: list[str]) -> None:
    frame = pd.DataFrame(rows)
    both = {"presto", "presto random init"} <= set(variants)
    print()
    print(f"{'case':<10}{'fraction':>9}{'n_train':>9}{'folds':>7}" + "".join(f"{v + ' OA':>22}" for v in variants)
          + (f"{'pretrained - random':>21}" if both else ""))
    for (case, fraction), part in frame.groupby(["case", "fraction"], sort=False):
        gain = f"{(part['presto'] - part['presto random init']).mean():>+21.3f}" if both else ""
        print(f"{case:<10}{fraction:>9.0%}{int(part['n_train'].mean()):>9}{len(part):>7}"
              + "".join(f"{part[v].mean():>22.3f}" for v in variants) + gain)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="slovenia,demo")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--run-folds", type=int, default=None, help="run only the first N of the folds (a quick look)")
    ap.add_argument("--fractions", default="0.1,0.3,1")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--min-steps", type=int, default=300)
    ap.add_argument("--variants", default="rf,presto,presto random init", help=f"any of {', '.join(VARIANTS)}")
    args = ap.parse_args()
    args.variants = args.variants.split(",")
    unknown = sorted(set(args.variants) - set(VARIANTS))
    if unknown:
        ap.error(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    args.fractions = [float(f) for f in args.fractions.split(",")]
    args.run_folds = args.run_folds or args.folds
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cases = args.cases.split(",")
        if "slovenia" in cases:
            frame, meta = real_tables.slovenia()
            rows += run_case("slovenia", frame, meta, 100.0, args, work)
        if "demo" in cases:
            from shared import demo_cube

            _, table = demo_cube(work)
            demo = samples.read(table)
            rows += run_case("demo", demo.frame.drop(columns=["split"]), demo.meta, 320.0, args, work)
    summary(rows, args.variants)


if __name__ == "__main__":
    main()
