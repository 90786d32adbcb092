"""A grid of training recipes on the six 500-row cases of ``models_on_small_tables.py`` (three draws of the
real Slovenia table, three of the demo's tile-years; 5 spatial folds each), many fits at once: which of a
deep model's parameters move its mean accuracy past lcflow's forest on the same folds.

The cases are written once (``prepare``, where the real fixtures and the demo's rasters are: each fold's
samples table, the demo test rows' true classes, lcflow's forest on every fold); ``run`` then trains each
recipe on every fold in ``--jobs`` processes (which may share one GPU), in the grid's order, and starts
nothing after ``--deadline`` seconds, so a limited lease returns whole recipes; ``summary`` prints each
recipe against the forest. ``prepare --clean`` cleans each fold's training rows as ``sample.clean`` does.

Usage:
    python benchmarks/studies/recipe_grid.py prepare DIR [--demo-subsets 3] [--clean]
    python benchmarks/studies/recipe_grid.py run DIR --grid GRID.json [--jobs 8] [--deadline 600] --out RESULTS.jsonl
    python benchmarks/studies/recipe_grid.py summary DIR RESULTS [RESULTS ...] [--reference R1,R2] [--only PREFIX]
    python benchmarks/studies/recipe_grid.py blend DIR --recipes R1,R2[,...] --name NAME --out BLEND.jsonl
``run --keep-proba`` keeps each fit's test probabilities (``DIR/proba/RECIPE/CASE_FOLD.npz``); ``blend`` scores the
mean of several recipes' probabilities fold by fold (an ensemble of models), as rows ``summary`` reads.
RESULTS: this script's fits, or models_on_small_tables.py's output with --seeds on the same cases and folds.
GRID.json: a list of {"name": ..., "model": "lstm", "params": {...}} (parameters over the model's defaults),
optionally with "cases": [PREFIX, ...], the folds whose names begin so alone (["demo"]: the demo's).
``run`` needs lcflow's training code alone (torch, scikit-learn, pandas): no raster libraries.
"""

import argparse
import json
import multiprocessing
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))


def case_name(name: str) -> str:
    """A case's name as its files and rows here spell it ("slovenia 500 #0" -> "slovenia_500_0")."""
    return name.replace(" ", "_").replace("#", "")


def fold_stems(directory: Path) -> list[str]:
    """The prepared folds' names (``CASE_FOLD``), in order."""
    return sorted(p.name[:-len(".parquet")] for p in directory.glob("*.parquet"))


def fold_row(recipe: str, model: str, stem: str, codes: np.ndarray, directory: Path) -> dict:
    """A result row of ``recipe`` on fold ``stem``, with the accuracy of ``codes`` against the demo's true
    classes where the fold has them."""
    row = {"recipe": recipe, "model": model, "case": stem.rsplit("_", 1)[0], "fold": int(stem.rsplit("_", 1)[1])}
    truth = directory / f"{stem}.truth.npy"
    if truth.exists():
        row["truth"] = float((codes == np.load(truth)).mean())
    return row


def prepare(directory: Path, subsets: int, folds: int, clean: bool = False) -> None:
    """Each case's folds as samples tables in ``directory`` (``CASE_FOLD.parquet``), with the demo test
    rows' true classes (``CASE_FOLD.truth.npy``) and lcflow's forest's scores (``forest.jsonl``). With
    ``clean`` each fold's training rows are cleaned as ``sample.clean`` cleans a tile's (its defaults; the
    test rows are left as they are)."""
    import models_on_small_tables as small

    from lcflow.labels import samples_table as samples
    from tests import real_tables

    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, open(directory / "forest.jsonl", "w") as forest:
        work = Path(tmp)
        for case in small.cases(("slovenia-500", "demo"), subsets, work):
            for k, table in enumerate(real_tables.spatial_folds(case.frame, folds, case.block_m, seed=0)):
                stem = f"{case_name(case.name)}_{k}"
                path = directory / f"{stem}.parquet"
                if clean:
                    table = cleaned(table, stem)
                samples.write(table, path, case.meta)
                test = samples.read(path).split("test")
                if case.truth:
                    np.save(directory / f"{stem}.truth.npy", small.truth_of(test.frame.reset_index(drop=True), work))
                row = score(("forest", "rf", {}), directory, stem, work / stem)
                forest.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)


def cleaned(table: pd.DataFrame, where: str) -> pd.DataFrame:
    """``table`` without the training rows that label cleaning drops (:mod:`lcflow.labels.cleaning` at its
    defaults, folds by the spatial blocks a deep model's validation rows are carved in)."""
    from lcflow.labels import cleaning
    from lcflow.labels import samples_table as samples
    from lcflow.train.data.training_data import spatial_blocks

    train = np.flatnonzero(table["split"].to_numpy() == "train")
    part = samples.check(table.iloc[train].reset_index(drop=True), where)
    drop = cleaning.noisy(cleaning.forest_rows(part.features()), part.frame["label"].to_numpy(),
                          spatial_blocks(part.frame)[0], cleaning.Cleaning(), where)
    print(f"{where}: cleaning drops {int(drop.sum())} of {len(train)} training rows", flush=True)
    return table.drop(index=table.index[train[drop]])


def score(task: tuple[str, str, dict], directory: Path, stem: str, out: Path, keep_proba: bool = False) -> dict:
    """One recipe trained on one fold (as ``models_on_small_tables.py`` trains its models): overall accuracy
    (and against the truth, on the demo), balanced accuracy, macro F1, seconds. With ``keep_proba`` the
    test rows' probabilities are kept for :func:`blend`."""
    import models_on_small_tables as small

    from lcflow.labels import samples_table as samples

    name, model, params = task
    started = time.perf_counter()
    path = directory / f"{stem}.parquet"
    test = samples.read(path).split("test")
    fitted = small.lcflow_model(model, path, out, params, test)
    metrics = fitted.metrics
    row = fold_row(name, model, stem, fitted.codes, directory) | {
        "oa": metrics["overall_accuracy"], "bal": metrics["balanced_accuracy"], "f1": metrics["macro_f1"],
        "s": round(time.perf_counter() - started, 2)}
    if keep_proba:
        kept = directory / "proba" / case_name(name) / f"{stem}.npz"
        kept.parent.mkdir(parents=True, exist_ok=True)
        np.savez(kept, proba=fitted.proba, empty=fitted.empty, classes=fitted.classes)
    return row


def blend(directory: Path, recipes: list[str], name: str, out: Path) -> None:
    """The mean of ``recipes``' kept test probabilities on every fold all of them ran on, scored as one
    recipe ``name``: overall accuracy against the labels (a row without any observation counts as wrong)
    and, on the demo, against the truth."""
    from lcflow.labels import samples_table as samples

    with open(out, "a") as sink:
        for stem in fold_stems(directory):
            kept = [directory / "proba" / case_name(r) / f"{stem}.npz" for r in recipes]
            if not all(k.exists() for k in kept):
                continue
            parts = [np.load(k) for k in kept]
            classes = parts[0]["classes"]
            if any(not np.array_equal(p["classes"], classes) for p in parts):
                raise SystemExit(f"{stem}: the recipes learnt other classes")
            mean = np.mean([p["proba"] for p in parts], axis=0)
            empty = np.any([p["empty"] for p in parts], axis=0)
            codes = np.where(empty, -1, classes[mean.argmax(axis=1)])
            labels = samples.read(directory / f"{stem}.parquet").split("test").frame["label"].to_numpy()
            row = fold_row(name, "+".join(recipes), stem, codes, directory) | {"oa": float((codes == labels).mean())}
            sink.write(json.dumps(row) + "\n")


def _work(job: tuple[tuple[str, str, dict], str, str, float, str, bool]) -> dict:
    task, directory, stem, deadline, scratch, keep_proba = job
    if time.time() > deadline:
        return {"recipe": task[0], "skipped": stem}
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        try:
            return score(task, Path(directory), stem, Path(tmp) / "model", keep_proba)
        except Exception as exc:  # one failed fit is a result too; the others go on
            return {"recipe": task[0], "case": stem, "error": f"{type(exc).__name__}: {exc}"}


def one_core(model: str) -> dict:
    """The parameter that keeps a fit on one core, so that ``--jobs`` fits share the cores evenly."""
    return {"n_jobs": 1} if model == "rf" else {"threads": 1}


def run(directory: Path, grid: list[dict], jobs: int, deadline_s: float, out: Path, keep_proba: bool = False) -> None:
    """Every recipe of ``grid`` on every fold, recipe after recipe, ``jobs`` fits at a time."""
    stems = fold_stems(directory)
    deadline = time.time() + deadline_s
    todo = [((g["name"], g["model"], {**one_core(g["model"]), **g.get("params", {})}), str(directory), stem, deadline,
             tempfile.gettempdir(), keep_proba) for g in grid for stem in stems if stem.startswith(tuple(g.get("cases", [""])))]
    started, done = time.perf_counter(), 0
    with multiprocessing.get_context("spawn").Pool(jobs) as pool, open(out, "a") as sink:
        for row in pool.imap(_work, todo):
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            done += "oa" in row
            if "oa" in row and done % 10 == 0:
                elapsed = time.perf_counter() - started
                print(f"{done} of {len(todo)} fits in {elapsed:.0f} s ({done / elapsed:.2f} a second)", flush=True)
            elif "error" in row:
                print(row, flush=True)


def read_results(path: Path) -> pd.DataFrame:
    """One file of fits: this script's (a row a fit), or the output of ``models_on_small_tables.py --seeds``
    on the same folds (a row a fold, ``MODEL@SEED`` its runs' accuracies), whose runs become recipes named
    ``MODEL @SEED (models_on_small_tables)``; lines that are not JSON rows (headers, tables) are skipped."""
    rows = []
    for line in path.read_text().splitlines():
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        if "recipe" in row:
            rows.append(row)
            continue
        for key, value in row.items():
            run = re.fullmatch(r"([a-z_]+)@(\d+)", key)
            if run and run[1] != "rf":
                rows.append({"recipe": f"{run[1]} @{run[2]} (models_on_small_tables)", "model": run[1],
                             "case": case_name(row["case"]), "fold": row["fold"], "oa": value})
    return pd.DataFrame(rows)


def summary(directory: Path, results: list[Path], reference: list[str], only: str = "") -> None:
    """Each recipe's mean OA per case beside lcflow's forest on the same folds, and its mean difference
    from the forest (and from the mean of the ``reference`` recipes) fold by fold, with the standard error
    of that mean over the folds: a recipe's gain is real where it is several standard errors wide. With
    ``only``, the recipes whose names begin so alone."""
    forest = pd.read_json(directory / "forest.jsonl", lines=True)
    frame = pd.concat([read_results(p) for p in results])
    frame = frame[frame["oa"].notna()] if "oa" in frame else frame.iloc[:0]
    if only:
        frame = frame[frame["recipe"].str.startswith(only)]
    cases = list(dict.fromkeys(forest["case"]))
    rf = forest.set_index(["case", "fold"])
    by_fold = frame.pivot_table(index=["case", "fold"], columns="recipe", values="oa")
    base = by_fold[reference].mean(axis=1) if reference else None

    def paired(diff: pd.Series) -> str:
        diff = diff.dropna()
        return f"{diff.mean():>+8.3f} +- {diff.std(ddof=1) / np.sqrt(len(diff)):.3f}"

    print(f"{'recipe':<44}{'fits':>5}" + "".join(f"{c[-12:]:>13}" for c in cases) + f"{'mean':>8}"
          f"{'minus forest':>18}{'worst case':>11}{'truth':>8}" + (f"{'minus reference':>19}" if reference else ""))
    rf_case = rf.groupby("case")["oa"].mean()
    print(f"{'lcflow forest':<44}{len(forest):>5}" + "".join(f"{rf_case[c]:>13.3f}" for c in cases)
          + f"{rf_case[cases].mean():>8.3f}")
    for recipe, part in frame.groupby("recipe", sort=False):
        means = part.groupby("case")["oa"].mean()
        have = [c for c in cases if c in means]
        line = f"{recipe:<44}{len(part):>5}" + "".join(f"{means[c]:>13.3f}" if c in means else f"{'-':>13}"
                                                      for c in cases)
        line += f"{means[have].mean():>8.3f}{paired(by_fold[recipe] - rf['oa']):>18}"
        line += f"{(means[have] - rf_case[have]).min():>+11.3f}"
        # results of cases without a true class (the real tables' alone) have no truth column
        gap = ((part.set_index(["case", "fold"])["truth"] - rf["truth"]).dropna() if "truth" in part
               else pd.Series(dtype=float))
        line += f"{gap.mean():>+8.3f}" if len(gap) else f"{'-':>8}"
        if base is not None:
            line += f"{paired(by_fold[recipe] - base):>19}"
        print(line)
    print("\nmean: over the cases a recipe ran on; minus forest, minus reference: mean difference fold by fold "
          "+- its standard error; worst case: the case mean furthest under the forest; truth: minus the forest "
          "against the demo's true classes" + (f"; reference: the mean of {', '.join(reference)}" if reference else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("dir", type=Path)
    p.add_argument("--demo-subsets", type=int, default=3)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--clean", action="store_true", help="clean each fold's training rows as sample.clean does")
    r = sub.add_parser("run")
    r.add_argument("dir", type=Path)
    r.add_argument("--grid", type=Path, required=True)
    r.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    r.add_argument("--deadline", type=float, default=600.0, help="seconds after which no fit starts")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--keep-proba", action="store_true", help="keep each fit's test probabilities, for blend")
    b = sub.add_parser("blend")
    b.add_argument("dir", type=Path)
    b.add_argument("--recipes", required=True, metavar="R1,R2", help="recipes run with --keep-proba")
    b.add_argument("--name", required=True)
    b.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("summary")
    s.add_argument("dir", type=Path)
    s.add_argument("results", type=Path, nargs="+")
    s.add_argument("--reference", default="", metavar="R1,R2",
                   help="recipes whose mean, fold by fold, every recipe is compared with (e.g. the default's seeds)")
    s.add_argument("--only", default="", metavar="PREFIX", help="the recipes whose names begin with PREFIX alone")
    args = ap.parse_args()
    if args.command == "prepare":
        prepare(args.dir, args.demo_subsets, args.folds, args.clean)
    elif args.command == "run":
        run(args.dir, json.loads(args.grid.read_text()), args.jobs, args.deadline, args.out, args.keep_proba)
    elif args.command == "blend":
        blend(args.dir, args.recipes.split(","), args.name, args.out)
    else:
        summary(args.dir, args.results, [r for r in args.reference.split(",") if r], args.only)


if __name__ == "__main__":
    main()
