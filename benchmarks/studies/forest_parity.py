"""Why lcflow's forest might score under a plain scikit-learn forest: each difference between the two
measured on its own, with forests of 300 trees (seed 42) on the same rows.

1. The input, on the cases of models_on_small_tables.py (Slovenia as 500-row field tables and whole;
   field-like demo subsets; 5 spatially blocked folds): the raw band columns with NaN where a value is
   missing (scikit-learn routes NaN itself), lcflow's prepared input (gaps interpolated in time,
   robustly standardised and clipped, an observed flag a step), that input without the flags, and the
   gap-filled raw values.
2. The rows, on lcflow's own samples tables of the demo (split train/val/test 0.6/0.2/0.2 in spatial
   blocks; whole and 500-row draws): the train rows alone (what ``lcflow train --model rf`` fits) against
   train + val rows (what a user fitting a plain forest on everything but the test rows would).

Test overall accuracy against the labels, and on the demo against the synthetic truth too.

Usage: python benchmarks/studies/forest_parity.py [--folds 5] [--subsets 3] [--draws 5]
"""

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # shared.py
sys.path.insert(0, str(Path(__file__).parent))

import models_on_small_tables as small  # noqa: E402

from lcflow.common.features import Standardiser, fill_gaps, prepare  # noqa: E402
from lcflow.labels import samples_table as samples  # noqa: E402
from tests import real_tables  # noqa: E402

INPUTS = ("raw_nan", "lcflow", "lcflow_no_flags", "filled_raw")


def forest(x: np.ndarray, y: np.ndarray) -> RandomForestClassifier:
    return RandomForestClassifier(300, n_jobs=-1, random_state=42).fit(x.reshape(len(x), -1), y)


def inputs(x_train: np.ndarray, x_test: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each input variant of the train and test series (samples, steps, bands)."""
    scale = Standardiser.fit(x_train)
    (p_train, _), (p_test, _) = prepare(x_train, scale), prepare(x_test, scale)
    bands = x_train.shape[2]
    return {"raw_nan": (x_train, x_test), "lcflow": (p_train, p_test),
            "lcflow_no_flags": (p_train[:, :, :bands], p_test[:, :, :bands]),
            "filled_raw": (np.nan_to_num(fill_gaps(x_train)), np.nan_to_num(fill_gaps(x_test)))}


def input_study(cases: list[small.Case], folds: int, work: Path) -> pd.DataFrame:
    rows = []
    for case in cases:
        for k, table in enumerate(real_tables.spatial_folds(case.frame, folds, case.block_m, seed=0)):
            path = work / f"inputs_{len(rows)}.parquet"
            samples.write(table, path, case.meta)
            train, test = (samples.read(path).split(s) for s in ("train", "test"))
            y_train, y_test = train.frame["label"].to_numpy(), test.frame["label"].to_numpy()
            row = {"case": case.name, "fold": k}
            for variant, (a, b) in inputs(train.features(), test.features()).items():
                row[variant] = float((forest(a, y_train).predict(b.reshape(len(b), -1)) == y_test).mean())
            print(row, flush=True)
            rows.append(row)
    return pd.DataFrame(rows)


def rows_study(tables: list[pd.DataFrame], meta: dict, draws: int, work: Path) -> pd.DataFrame:
    def score(frame: pd.DataFrame, splits: list[str]) -> tuple[float, float]:
        table = samples.check(frame.reset_index(drop=True), "demo samples", meta)
        train, test = table.rows(table.frame["split"].isin(splits).to_numpy()), table.split("test")
        a, b = inputs(train.features(), test.features())["lcflow"]
        predicted = forest(a, train.frame["label"].to_numpy()).predict(b.reshape(len(b), -1))
        return (float((predicted == test.frame["label"]).mean()),
                float((predicted == small.truth_of(test.frame, work)).mean()))

    rows = []
    for table in tables:
        name = f"{table['tile'].iloc[0]} {table['year'].iloc[0]}"
        for draw, part in [("all", table)] + [(f"500 #{i}", table.sample(500, random_state=i)) for i in range(draws)]:
            (oa, truth), (oa_val, truth_val) = score(part, ["train"]), score(part, ["train", "val"])
            row = {"table": name, "rows": draw, "n_train": int((part["split"] == "train").sum()),
                   "n_val": int((part["split"] == "val").sum()), "n_test": int((part["split"] == "test").sum()),
                   "train_OA": oa, "train_val_OA": oa_val, "train_truth": truth, "train_val_truth": truth_val}
            print(row, flush=True)
            rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--subsets", type=int, default=3, help="500-row field-like tables drawn from each source")
    ap.add_argument("--draws", type=int, default=5, help="500-row draws of each demo samples table")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tables = small.demo_samples(work)
        by_input = input_study(small.cases(small.CASES, args.subsets, work, tables), args.folds, work)
        by_rows = rows_study(tables, samples.read(work / "31UFT" / "2018" / "s.parquet").meta, args.draws, work)
    print("\n1. the input (mean test OA over the folds)")
    print(by_input.groupby("case", sort=False)[list(INPUTS)].mean().round(3).to_string())
    print("all cases", " ".join(f"{v}={by_input[v].mean():.4f}" for v in INPUTS))
    print("\n2. the rows (lcflow's input; test OA against the labels and the truth)")
    by_rows["size"] = np.where(by_rows["rows"] == "all", "whole table", "500 rows")
    print(by_rows.groupby(["size", "table"], sort=False)[["train_OA", "train_val_OA", "train_truth", "train_val_truth"]]
          .mean().round(3).to_string())
    print(by_rows.groupby("size", sort=False)[["train_OA", "train_val_OA", "train_truth", "train_val_truth"]]
          .mean().round(4).to_string())


if __name__ == "__main__":
    main()
