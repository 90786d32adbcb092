"""What taking a deep model's class weights back out of its probabilities does to its map, on the cases of
``models_on_small_tables.py``.

A deep model's loss weighs each class (``class_weight``, sqrt by default) so that rare classes are learnt at
all. A network trained so answers, at best, the weighted posterior: ``q(c|x)`` proportional to ``w_c p(c|x)``,
so its map over-predicts the classes the weights lifted, which costs overall accuracy where the classes are
as unequal as on a real landscape (the whole Slovenia table). Dividing ``q`` by ``w_c ** tau`` (tau 1: the
posterior of the training rows' class frequencies, Saerens et al. 2002; the logit adjustment of Menon et al.
2021) takes the weights out of the decision and keeps what they taught. Every fit here is scored at each
``--taus`` from the same probabilities (nothing is retrained), against the labels and, on the demo, against
its truth; ``val`` takes, per fit, the tau with the best overall accuracy on the fit's own validation rows
(ties to the smallest), as a run can choose it without seeing the test rows. lcflow's forest on the same
folds is the reference.

Usage: python benchmarks/studies/prior_correction.py [--cases slovenia-500,demo] [--demo-subsets 3] [--subset I]
       [--models lstm] [--taus 0,0.5,1] [--set MODEL.KEY=VALUE ...]
       python benchmarks/studies/prior_correction.py --summary OUTPUT [--models lstm] [--taus 0,0.5,1]
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).parent))

import models_on_small_tables as small  # noqa: E402

from lcflow.common.metrics import scores  # noqa: E402
from lcflow.labels import samples_table as samples  # noqa: E402
from lcflow.train import training  # noqa: E402
from lcflow.train.data import training_data  # noqa: E402
from lcflow.train.model_dirs.model_dir import TrainedModel  # noqa: E402
from lcflow.train.models import hyperparameters, model_class  # noqa: E402
from tests import real_tables  # noqa: E402


def fold_rows(case: small.Case, k: int, table: pd.DataFrame, work: Path, models: list[str], taus: list[float],
              params: dict[str, dict]) -> dict:
    """lcflow's forest and each deep model on one fold, each model at every tau."""
    stem = f"{case.name.replace(' ', '_').replace('#', '')}_{k}"
    path = work / f"{stem}.parquet"
    samples.write(table, path, case.meta)
    test = samples.read(path).split("test")
    labels = test.frame["label"].to_numpy()
    truth = small.truth_of(test.frame.reset_index(drop=True), work) if case.truth else None
    row = {"case": case.name, "fold": k, "n_test": len(labels)}
    started = time.perf_counter()
    forest = small.lcflow_model("rf", path, work / f"{stem}_rf", {}, test)
    row |= {"rf": forest.metrics["overall_accuracy"], "rf_bal": forest.metrics["balanced_accuracy"],
            "rf_s": round(time.perf_counter() - started, 1)}
    if truth is not None:
        row["rf_truth"] = float((forest.codes == truth).mean())
    for model in models:
        given = {"threads": 1} | params.get(model, {})
        out = work / f"{stem}_{model}"
        started = time.perf_counter()
        training.train(model, [str(path)], out, given)
        seconds = time.perf_counter() - started
        trained = TrainedModel.load(out)
        # the fit's own val rows, carved as training carved them
        data = training_data.prepare_data(model_class(model), model, [str(path)], hyperparameters.check(model, given),
                                     carve=True)
        net, weights = trained.model, trained.model.loss_weights  # the loss's weights, as model.json records them
        proba, empty = trained.probabilities(test.features(trained.bands, trained.steps),
                                             test.latlon() if trained.model.uses_position else None)
        val_proba = net.predict_proba(data.x_val)
        classes = np.asarray(trained.classes)
        row[f"{model}_s"] = round(seconds, 1)
        row[f"{model}_weights"] = [round(float(w), 3) for w in weights]
        val_oa = {}
        for tau in taus:
            codes = np.where(empty, -1, classes[net.corrected(proba, tau=tau).argmax(1)])
            got = scores(labels, codes)
            key = f"{model}@{tau:g}"
            row |= {key: got["overall_accuracy"], f"{key}_bal": got["balanced_accuracy"], f"{key}_f1": got["macro_f1"]}
            if truth is not None:
                row[f"{key}_truth"] = float((codes == truth).mean())
            val_oa[tau] = float((net.corrected(val_proba, tau=tau).argmax(1) == data.y_val).mean())
        chosen = max(taus, key=lambda t: (val_oa[t], -t))
        row[f"{model}_val_oa"] = {f"{t:g}": round(v, 4) for t, v in val_oa.items()}
        row[f"{model}@val_tau"] = chosen
    print(json.dumps(row), flush=True)
    return with_val_choice(row, models)


def with_val_choice(row: dict, models: list[str]) -> dict:
    """``row`` with each model's scores at the tau its validation rows chose, as ``MODEL@val``."""
    for model in models:
        chosen = row.get(f"{model}@val_tau")
        if chosen is None:
            continue
        for suffix in ("", "_bal", "_f1", "_truth"):
            if f"{model}@{chosen:g}{suffix}" in row:
                row[f"{model}@val{suffix}"] = row[f"{model}@{chosen:g}{suffix}"]
    return row


def summary(rows: list[dict], models: list[str], taus: list[float]) -> None:
    """Each case's mean over its folds, and each variant minus the forest (mean +- standard error)."""
    frame = pd.DataFrame(rows)
    variants = [f"{m}@{t:g}" for m in models for t in taus] + [f"{m}@val" for m in models]
    for what, suffix in (("overall accuracy against the labels", ""), ("against the truth (demo)", "_truth"),
                         ("balanced accuracy", "_bal")):
        cols = [c for c in ["rf"] + variants if f"{c}{suffix}" in frame.columns]
        if not cols:
            continue
        print(f"\n{what}: mean over the folds")
        print(f"{'case':<24}" + "".join(f"{c:>12}" for c in cols))
        for case, part in frame.groupby("case", sort=False):
            print(f"{case:<24}" + "".join(f"{part[c + suffix].mean():>12.3f}" if (c + suffix) in part
                                          and part[c + suffix].notna().any() else f"{'':>12}" for c in cols))
        for c in cols[1:]:
            diff = (frame[c + suffix] - frame["rf" + suffix]).dropna()
            if len(diff):
                print(f"  {c} minus the forest: {diff.mean():+.3f} +- {diff.std(ddof=1) / np.sqrt(len(diff)):.3f} "
                      f"({len(diff)} folds)")
        for m in models:
            base = f"{m}@0{suffix}"
            for reading in [f"{t:g}" for t in taus if t != 0] + ["val"]:
                key = f"{m}@{reading}{suffix}"
                if key in frame and base in frame:
                    diff = (frame[key] - frame[base]).dropna()
                    print(f"  {m}@{reading} minus {m}@0: {diff.mean():+.3f} +- "
                          f"{diff.std(ddof=1) / np.sqrt(len(diff)):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="slovenia-500,demo", help="of slovenia-500, slovenia, demo")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--demo-subsets", type=int, default=3)
    ap.add_argument("--subset", type=int, default=None, metavar="I", help="draw #I of each source alone")
    ap.add_argument("--models", default="lstm", help="deep models, comma-separated")
    ap.add_argument("--taus", default="0,0.5,1", help="exponents of the class weights divided out, comma-separated")
    ap.add_argument("--set", action="append", default=[], metavar="MODEL.KEY=VALUE")
    ap.add_argument("--summary", type=Path, metavar="OUTPUT",
                    help="print the summary of an earlier run's output (its JSON rows) instead of running")
    args = ap.parse_args()
    models = args.models.split(",")
    taus = [float(t) for t in args.taus.split(",")]
    if args.summary:
        rows = [with_val_choice(json.loads(line), models) for line in args.summary.read_text().splitlines()
                if line.startswith("{")]
        summary(rows, models, taus)
        return
    if 0.0 not in taus:
        ap.error("--taus: include 0 (the model as it predicts now)")
    params: dict[str, dict] = {}
    for pair in args.set:
        model, _, assignment = pair.partition(".")
        params.setdefault(model, {}).update(hyperparameters.parse_overrides([assignment]))
    for model in models:
        hyperparameters.check(model, params.get(model, {}), where=f"--set {model}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for case in small.cases(tuple(args.cases.split(",")), args.demo_subsets, work, only=args.subset):
            for k, table in enumerate(real_tables.spatial_folds(case.frame, args.folds, case.block_m, seed=0)):
                rows.append(fold_rows(case, k, table, work, models, taus, params))
    summary(rows, models, taus)


if __name__ == "__main__":
    main()
