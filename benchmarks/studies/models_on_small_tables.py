"""Default models on small, real and realistic tables: the majority rate, a plain scikit-learn forest and
lcflow's models side by side.

Cases (tests/real_tables.py):
- slovenia: the eo-learn Slovenia patch, every labelled pixel, 68 irregular NDVI dates, 40 % cloud;
- field-like subsets of the demo samples: 500 rows, classes 305/97/28/23/12 (of 465), 7 % cells missing;
- demo-months: the same subsets with whole time steps missing instead (every band of a step, 7.5 % of
  the steps: 61 % of the rows miss at least one of the 12), as cloudy months in monthly composites;
each in 5 spatially blocked folds with split = train/test only (so training carves its own val rows).
Every model runs with its default parameters through ``lcflow.train.training.train``; ``plain_rf`` is
``RandomForestClassifier(300)`` fitted by scikit-learn alone on the table's raw columns (gaps left as NaN,
which its trees route), the reference lcflow's forest is held to. The table printed holds the mean overall
accuracy over the folds (and the smallest fold), balanced accuracy and macro F1.
The demo's test rows carry CORINE labels, wrong for some of them as real CORINE is; there each model is
also scored against the synthetic truth at the same points.

Usage: python benchmarks/studies/models_on_small_tables.py [--cases slovenia,demo] [--folds 5] [--demo-subsets 2] [--subset I]
       [--models plain_rf,rf,lstm,tempcnn,ltae,presto,blend] [--undated] [--seeds 42,43,44] [--set MODEL.KEY=VALUE ...]
(``--set presto.min_steps=300`` gives one model a parameter other than its default, e.g. a CPU's budget;
the run prints every parameter so set before it starts. ``--seeds`` trains each of lcflow's models once per
seed: the table then holds the ensemble of those runs (the mean of their probabilities) and, below it,
each seed alone, which shows how far a case's mean moves with the seed. ``blend`` is lcflow's blend of its
default members, the forest and tempcnn, made by ``lcflow.train.model_dirs.blend`` from the fold's two models: list it
after them, without ``--seeds``.)
"""

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lcflow.common.metrics import scores  # noqa: E402
from lcflow.labels import samples_table as samples  # noqa: E402
from lcflow.labels.sample_settings import SampleSettings  # noqa: E402
from lcflow.train import training  # noqa: E402
from lcflow.train.model_dirs import blend, saved_models  # noqa: E402
from lcflow.train.model_dirs.model_dir import TrainedModel  # noqa: E402
from lcflow.train.models import hyperparameters  # noqa: E402
from tests import real_tables  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "benchmarks"))  # shared.py

MODELS = ("plain_rf", "rf", "lstm", "tempcnn", "ltae", "presto", "blend")
BLEND_MEMBERS = ("rf", "tempcnn")
CASES = ("slovenia-500", "slovenia", "demo", "demo-months")
#: the share of a field-like table's time steps missing whole in the demo-months case
MISSING_STEPS = 0.075


def demo_samples(work: Path) -> list[pd.DataFrame]:
    """The demo's samples tables (600 per class and tile-year, as the demo config draws them)."""
    from shared import (
        demo_tiles,  # the demo's rasters: imported here, so that training alone needs no rasterio
    )

    from lcflow.labels import sampling

    out = []
    for one in demo_tiles(work):
        table = one.dir / "s.parquet"
        sampling.run(one.cube, one.valid, one.labels, table, SampleSettings(
            per_class=600, min_valid_fraction=0.4, boundary_px=2, block_px=32, min_per_class=0,
            clean={"min_label_probability": 0}), tile=one.tile, year=one.year)
        out.append(pd.read_parquet(table))
    return out


def truth_of(frame: pd.DataFrame, work: Path) -> np.ndarray:
    """The demo's true class (level 2, as the labels) of each row: the synthetic truth raster at x/y."""
    import rasterio

    from lcflow.labels import nomenclature

    out = np.zeros(len(frame), dtype=np.int64)
    for (tile, year), part in frame.groupby(["tile", "year"]):
        with rasterio.open(work / "demo" / "truth" / f"{tile}_{year}.tif") as src:
            clc = np.array([v[0] for v in src.sample(list(zip(part["x"], part["y"])))])
        out[frame.index.get_indexer(part.index)] = nomenclature.clc_level(2).apply(clc)
    return out


def plain_forest(table: samples.SampleTable) -> tuple[dict, np.ndarray]:
    """scikit-learn's forest of 300 trees on the raw band columns of the train rows (NaN where a value is
    missing); its test scores, as lcflow's metrics name them, and its test classes."""
    from sklearn.ensemble import RandomForestClassifier

    train, test = table.split("train"), table.split("test")
    x_train, x_test = (p.features().reshape(len(p.frame), -1) for p in (train, test))
    forest = RandomForestClassifier(300, n_jobs=-1, random_state=42).fit(x_train, train.frame["label"].to_numpy())
    codes = forest.predict(x_test)
    return scores(test.frame["label"].to_numpy(), codes), codes


@dataclass
class Fitted:
    """What :func:`lcflow_model` found on the test rows."""

    metrics: dict  # overall and balanced accuracy, macro F1, ...
    codes: np.ndarray  # the class of each row, -1 where it had no observation
    by_seed: dict[int, float]  # each seed's own overall accuracy (with seeds)
    proba: np.ndarray  # the (mean) probability of every class, in the order of ``classes``
    classes: np.ndarray
    empty: np.ndarray  # rows without any observation


def lcflow_model(model: str, path: Path, out: Path, given: dict, test: samples.SampleTable,
                 seeds: tuple[int, ...] = ()) -> Fitted:
    """lcflow's ``model`` trained on the table at ``path``: its scores, classes and probabilities on the
    ``test`` rows (a row without any observation counts as wrong). With ``seeds``, one run for each seed,
    scored by the mean of their probabilities (an ensemble), and each run's own overall accuracy by seed."""
    probabilities, by_seed = [], {}
    for seed in seeds or (None,):
        where = out if seed is None else out / f"seed{seed}"
        metrics = training.train(model, [str(path)], where, given if seed is None else given | {"seed": seed})
        trained = TrainedModel.load(where)
        proba, empty = trained.probabilities(test.features(trained.bands, trained.steps),
                                             test.latlon() if trained.model.uses_position else None)
        probabilities.append(proba)
        if seed is not None:
            by_seed[seed] = metrics["test"]["overall_accuracy"]
    classes, mean = np.asarray(trained.classes), np.mean(probabilities, axis=0)
    codes = np.where(empty, -1, classes[mean.argmax(axis=1)])
    return Fitted(scores(test.frame["label"].to_numpy(), codes, trained.class_names) if seeds else metrics["test"],
                  codes, by_seed, mean, classes, empty)


def blended(path: Path, members: list[Path], out: Path, test: samples.SampleTable) -> tuple[dict, np.ndarray]:
    """lcflow's blend of the fold's fitted ``members``: its scores and classes on the ``test`` rows."""
    metrics = blend.make(members, out, [str(path)])
    trained = saved_models.load(out)
    codes, _, empty = trained.predict(test.features(trained.bands, trained.steps))
    return metrics["test"], np.where(empty, -1, codes)


def run_case(name: str, frame: pd.DataFrame, meta: dict, folds: int, block_m: float, work: Path,
             models: tuple[str, ...], truth: bool = False, params: dict[str, dict] | None = None,
             seeds: tuple[int, ...] = ()) -> list[dict]:
    """Every model on every fold; with ``truth`` (the demo) also scored against the true classes, since
    the CORINE labels of the test rows are themselves wrong for some of them. With ``seeds``, each of
    lcflow's models runs once per seed and is scored as their ensemble (:func:`lcflow_model`)."""
    rows = []
    for k, table in enumerate(real_tables.spatial_folds(frame, folds, block_m, seed=0)):
        path = work / f"{name}_{k}.parquet"
        samples.write(table, path, meta)
        test = table[table["split"] == "test"]
        train = table[table["split"] == "train"]
        majority = float((test["label"] == train["label"].value_counts().idxmax()).mean())
        row = {"case": name, "fold": k, "n_train": len(train), "n_test": len(test), "majority": majority}
        written = samples.read(path)
        part = written.split("test")
        for model in models:
            started = time.perf_counter()
            if model == "plain_rf":
                t, codes = plain_forest(written)
            elif model == "blend":
                t, codes = blended(path, [work / f"{name}_{k}_{m}" for m in BLEND_MEMBERS], work / f"{name}_{k}_blend", part)
            else:
                given = ({"threads": 2} if model != "rf" else {}) | (params or {}).get(model, {})
                fitted = lcflow_model(model, path, work / f"{name}_{k}_{model}", given, part, seeds)
                t, codes = fitted.metrics, fitted.codes
                row |= {f"{model}@{seed}": accuracy for seed, accuracy in fitted.by_seed.items()}
            row |= {model: t["overall_accuracy"], f"{model}_bal": t["balanced_accuracy"], f"{model}_f1": t["macro_f1"],
                    f"{model}_s": time.perf_counter() - started}
            if truth:
                true = truth_of(part.frame.reset_index(drop=True), work)
                row[f"{model}_truth"] = float((codes == true).mean())
        if truth:
            row["labels_true"] = float((test["label"].to_numpy() == truth_of(test.reset_index(drop=True), work)).mean())
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def summary(rows: list[dict], models: tuple[str, ...]) -> None:
    frame = pd.DataFrame(rows)
    print()
    print(f"{'case':<22}{'folds':>6}{'majority':>10}" + "".join(f"{m + ' OA':>12}{'(min)':>8}" for m in models)
          + "".join(f"{m + ' bal':>10}{m + ' F1':>9}" for m in models))
    for case, part in frame.groupby("case", sort=False):
        line = f"{case:<22}{len(part):>6}{part['majority'].mean():>10.3f}"
        line += "".join(f"{part[m].mean():>12.3f}{part[m].min():>8.3f}" for m in models)
        line += "".join(f"{part[m + '_bal'].mean():>10.3f}{part[m + '_f1'].mean():>9.3f}" for m in models)
        print(line)
    if "labels_true" in frame:
        truth = frame.dropna(subset=["labels_true"])
        print()
        print("against the true classes (demo; the CORINE labels of the test rows are right for "
              f"{truth['labels_true'].mean():.3f} of them, {truth['labels_true'].min():.3f} in the worst fold)")
        for case, part in truth.groupby("case", sort=False):
            print(f"{case:<22}" + "".join(f"{m + ' OA':>12}{part[m + '_truth'].mean():>7.3f} (min {part[m + '_truth'].min():.3f})"
                                          for m in models))
    # each source's folds of all its draws together: the mean and its spread (standard deviation over folds)
    source = frame["case"].str.replace(r" #\d+$", "", regex=True).str.replace(r" \w+ \d{4}$", "", regex=True)
    print()
    print("by source (mean +- standard deviation over every fold of every draw)")
    for name, part in frame.groupby(source, sort=False):
        print(f"{name:<22}{len(part):>4} folds  " + "  ".join(
            f"{m} OA {part[m].mean():.3f}+-{part[m].std(ddof=1):.3f} F1 {part[m + '_f1'].mean():.3f}+-"
            f"{part[m + '_f1'].std(ddof=1):.3f}" for m in models))
    by_seed = [m for m in models if any(c.startswith(f"{m}@") for c in frame)]
    if by_seed:  # how far one run's case mean moves with the seed alone, beside the ensemble's
        print()
        print("each seed alone (mean OA over the folds; the OA columns above are the seeds' ensemble)")
        for case, part in frame.groupby("case", sort=False):
            for m in by_seed:
                alone = part[[c for c in part if c.startswith(f"{m}@")]].mean()
                print(f"{case:<22}{m:>9}  " + " ".join(f"{v:.3f}" for v in alone)
                      + f"  (mean {alone.mean():.3f}, range {alone.max() - alone.min():.3f}; ensemble {part[m].mean():.3f})")
    if "rf" in models:
        for m in (m for m in models if m != "rf"):
            gap = (frame.groupby("case", sort=False)[m].mean() - frame.groupby("case", sort=False)["rf"].mean())
            print(f"{m} - rf (mean OA): " + ", ".join(f"{c} {v:+.3f}" for c, v in gap.items()))
            by_source = gap.groupby(gap.index.str.replace(r" #\d+$", "", regex=True), sort=False)
            if (by_source.size() > 1).any():  # several draws of a source: how far its mean gap is from noise
                print(f"{m} - rf over the draws of a source (mean, standard error, draws): " + ", ".join(
                    f"{source} {g.mean():+.3f} +- {g.std(ddof=1) / np.sqrt(len(g)):.3f} ({len(g)})"
                    for source, g in by_source if len(g) > 1))


@dataclass(frozen=True)
class Case:
    """One table the models are compared on: its rows, metadata, the side of its spatial blocks, and
    whether its rows have a synthetic truth to be scored against too (the demo)."""

    name: str
    frame: pd.DataFrame
    meta: dict
    block_m: float
    truth: bool = False


def cases(names: tuple[str, ...], subsets: int, work: Path, demo_tables: list[pd.DataFrame] | None = None,
          only: int | None = None) -> list[Case]:
    """The cases of ``names`` (of CASES), in CASES' order: ``subsets`` field-like 500-row tables of
    Slovenia, Slovenia whole, and ``subsets`` field-like tables of the demo (cells missing, or whole
    time steps for demo-months), whose samples tables are made
    in ``work`` unless given; with ``only``, draw #only of each source alone (each draw is seeded by its
    number). One list for every benchmark that compares models on them."""
    draws = range(subsets) if only is None else [only]
    out = []
    if "slovenia-500" in names or "slovenia" in names:
        frame, meta = real_tables.slovenia()
        if "slovenia-500" in names:
            out += [Case(f"slovenia 500 #{i}", real_tables.field_like(frame, 500, seed=i), meta, 100.0)
                    for i in draws]
        if "slovenia" in names:
            out.append(Case("slovenia (all pixels)", frame, meta, 100.0))
    if "demo" in names or "demo-months" in names:
        tables = demo_tables if demo_tables is not None else demo_samples(work)
        meta = samples.read(work / "31UFT" / "2018" / "s.parquet").meta
        for case, how in (("demo", {}), ("demo-months", {"missing": 0.0, "missing_steps": MISSING_STEPS})):
            if case not in names:
                continue
            for i in draws:
                table = tables[i % len(tables)]
                out.append(Case(f"{case} {table['tile'].iloc[0]} {table['year'].iloc[0]} #{i}",
                                real_tables.field_like(table, 500, seed=i, **how), meta, 320.0, truth=True))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES),
                    help="slovenia (every labelled pixel), slovenia-500, demo and demo-months (field-like subsets)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--demo-subsets", type=int, default=2, help="field-like subsets drawn from each source")
    ap.add_argument("--subset", type=int, default=None, metavar="I",
                    help="run draw #I of each source alone (draws are seeded by their number: the same table as "
                         "in a run of all of them), so the draws of a long run can go to processes of their own")
    ap.add_argument("--models", default=",".join(MODELS), help=f"any of {', '.join(MODELS)}")
    ap.add_argument("--undated", action="store_true",
                    help="leave the tables' dates out (models that encode time then take equal parts of a year)")
    ap.add_argument("--seeds", default="", metavar="S1,S2,...",
                    help="train each of lcflow's models once per seed and score the mean of their probabilities "
                         "(an ensemble); each seed's own accuracy is printed too")
    ap.add_argument("--set", action="append", default=[], metavar="MODEL.KEY=VALUE",
                    help="a parameter of one of lcflow's models other than its default (repeatable)")
    args = ap.parse_args()
    models, names = tuple(args.models.split(",")), tuple(args.cases.split(","))
    try:
        seeds = tuple(int(seed) for seed in args.seeds.split(",") if seed)
    except ValueError:
        ap.error(f"--seeds {args.seeds!r}: expected whole numbers separated by commas")
    params: dict[str, dict] = {}
    for pair in args.set:
        model, dot, assignment = pair.partition(".")
        if not dot or model not in MODELS or model in ("plain_rf", "blend"):
            ap.error(f"--set {pair!r}: expected MODEL.KEY=VALUE with MODEL one of {', '.join(MODELS[1:-1])}")
        params.setdefault(model, {}).update(hyperparameters.parse_overrides([assignment]))
    for model, given in params.items():  # a typo fails here, not after an hour of other models
        try:
            hyperparameters.check(model, given, where=f"--set {model}")
        except hyperparameters.ParamError as exc:
            ap.error(str(exc))
        print(f"{model}: {given} over its defaults")
    if args.subset is not None and not 0 <= args.subset < args.demo_subsets:
        ap.error(f"--subset {args.subset}: no such draw (--demo-subsets {args.demo_subsets} draws #0 to "
                 f"#{args.demo_subsets - 1})")
    for option, given, known in (("--models", models, MODELS), ("--cases", names, CASES)):
        unknown = sorted(set(given) - set(known))
        if unknown:
            ap.error(f"{option}: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    if "blend" in models:
        before = models[:models.index("blend")]
        if seeds or any(m not in before for m in BLEND_MEMBERS):
            ap.error(f"--models blend: list {', '.join(BLEND_MEMBERS)} before it, and give no --seeds")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for case in cases(names, args.demo_subsets, work, only=args.subset):
            meta = {k: v for k, v in case.meta.items() if k != "time_steps"} if args.undated else case.meta
            rows += run_case(case.name, case.frame, meta, args.folds, case.block_m, work, models, truth=case.truth,
                             params=params, seeds=seeds)
    summary(rows, models)


if __name__ == "__main__":
    main()
