"""``lcflow train`` and ``lcflow evaluate``: any model, from any samples table."""

import csv
import functools
import hashlib
import io
import json
import logging
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from lcflow.common.atomic import atomic_path, write_text
from lcflow.common.features import Standardiser, prepare, prepare_patches, with_position
from lcflow.defaults import default
from lcflow.errors import LcflowError
from lcflow.labels import samples_table
from lcflow.labels.nomenclature import clc_level
from lcflow.train import deep, forest_teacher, hyperparameters
from lcflow.train.distributed import connect
from lcflow.train.evaluation import evaluate_table
from lcflow.train.model_dir import META_FILE, METRICS_FILE, TrainedModel
from lcflow.train.models import model_class
from lcflow.train.models.torch_model import TorchModel

log = logging.getLogger("lcflow.train")

#: largest spatial block when validation rows are carved out of the training rows (metres, pixels)
BLOCK_M, BLOCK_PX = 320.0, 32


CHECKPOINT = "checkpoint.pt"
REFIT_CHECKPOINT = "checkpoint_refit.pt"  # the refit on train and val rows (model_params refit)


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` strings -> dict, values parsed as YAML scalars (``3``, ``0.1``, ``true``, ``null``)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise LcflowError(f"--set {pair!r}: expected key=value")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            out[key.strip()] = value  # not a YAML scalar: the text itself, checked against the parameter
    return out


def parse_params(text: str | None) -> dict[str, Any]:
    """``--params``: a JSON object of parameters (how the workflow passes a model's configured ones)."""
    if not text:
        return {}
    try:
        given = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LcflowError(f"--params {text[:80]!r}: not a JSON object ({exc})") from exc
    if not isinstance(given, dict):
        raise LcflowError(f"--params {text[:80]!r}: not a JSON object of parameter names and values")
    return given


def _colors(table: samples_table.SampleTable, classes: list[int]) -> dict[int, tuple[int, int, int]]:
    """Class colours from the table, else CORINE's where the codes are CLC codes, else a palette."""
    given = {int(k): tuple(v) for k, v in table.meta.get("class_colors", {}).items() if v}
    clc = {**clc_level(1).colors, **clc_level(2).colors, **clc_level(3).colors}
    palette = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
               (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207)]
    return {c: given.get(c) or clc.get(c) or palette[i % len(palette)] for i, c in enumerate(classes)}


#: parameters that do not change what a run trains (how fast it runs, how its outputs are read), so a
#: checkpoint is resumed whatever their value
NOT_TRAINING = ("threads", "weight_correction")


def fingerprint(model_name: str, sample_paths: list[str], params: dict[str, Any]) -> str:
    """What identifies a training run, so a checkpoint is only resumed by the same run."""
    h = hashlib.sha256(json.dumps([model_name, {k: v for k, v in params.items() if k not in NOT_TRAINING}],
                                  sort_keys=True).encode())
    for p in sample_paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()


@dataclass
class Prepared:
    """A samples table made ready for a model: split, standardised, in the model's input form."""

    table: samples_table.SampleTable
    names: str
    classes: list[int]
    standardise: Standardiser
    x: np.ndarray
    y: np.ndarray
    x_val: np.ndarray | None
    y_val: np.ndarray | None
    counts: np.ndarray  # training samples per class
    n_train: int
    validation: dict[str, Any]
    blocks: np.ndarray | None = None  # the spatial block of each train row, then of each val row (None: no positions)

    @property
    def train_blocks(self) -> np.ndarray | None:
        """The spatial block of each train row (None: no positions)."""
        return None if self.blocks is None else self.blocks[:len(self.y)]

    @functools.cached_property
    def teacher(self) -> forest_teacher.ForestTeacher:
        """The forest teacher of the train rows (``distill``), one for every model trained on them."""
        return forest_teacher.ForestTeacher(self.x, self.y, self.train_blocks, len(self.classes))

    @property
    def has_val(self) -> bool:
        return self.x_val is not None and len(self.x_val) > 0


def prepare_data(cls, model_name: str, sample_paths: list[str], params: dict[str, Any], carve: bool) -> Prepared:
    """Read and check the samples, set validation rows aside (carved from train when the table has
    none and ``carve``), fit the scaling on train and build the model's inputs."""
    names = ", ".join(map(str, sample_paths))
    table = samples_table.read(sample_paths)
    if cls.input_kind == "patch" and not table.patch_size:
        raise LcflowError(f"model {model_name} trains on patches: samples table(s) {names} "
                          "have none (set sample.patch_px, e.g. 11)")
    has_split = "split" in table.frame.columns
    train_part = _observed(table.split("train"), "train", names)
    val_part = _observed(table.split("val"), "val", names) if has_split else None
    if len(train_part.frame) == 0:
        raise LcflowError(f"samples table(s) {names}: no 'train' rows with an observation")
    classes = train_part.classes
    if len(classes) < 2:
        raise LcflowError(f"samples table(s) {names}: the train split has one class only")
    validation = {"source": "val rows of the table"}
    if carve and (val_part is None or len(val_part.frame) == 0):
        # a deep model selects its round on val (a study compares trials on it): without val rows, set some
        # training rows aside (a forest has no val_fraction of its own: the deep models' default)
        fraction = params.get("val_fraction", hyperparameters.TRAINING["val_fraction"].default)
        train_part, val_part, validation = carve_validation(train_part, fraction, params["seed"])
        log.info("no val rows: %d of the training rows set aside for validation (%s)", len(val_part.frame),
                 validation["method"])
    index = {c: i for i, c in enumerate(classes)}
    standardise = Standardiser.fit(train_part.features())
    x = model_input(cls, train_part, standardise, names)
    y = train_part.frame["label"].map(index).to_numpy()
    x_val = y_val = None
    frames = [train_part.frame]
    if val_part is not None and len(val_part.frame):
        keep = val_part.frame["label"].isin(classes).to_numpy()
        x_val = model_input(cls, val_part, standardise, names)[keep]
        y_val = val_part.frame["label"][keep].map(index).to_numpy()
        frames.append(val_part.frame[keep])
    counts = np.bincount(y, minlength=len(classes)).astype(float)
    blocks = spatial_blocks(pd.concat(frames, ignore_index=True))
    return Prepared(table, names, classes, standardise, x, y, x_val, y_val, counts, int(len(train_part.frame)),
                    validation, None if blocks is None else blocks[0])


def train(model_name: str, sample_paths: list[str], out: str | Path, overrides: dict[str, Any] | None = None,
          tuned: dict[str, Any] | None = None, backend: str = default("distributed.backend")) -> dict:
    """Train ``model_name`` on the train split, select on val, score on test; write the model directory.

    Under a parallel launcher every rank trains its shard of the data (deep models) and rank 0 alone
    writes; a Random Forest is trained by rank 0 alone. Everything is checked before the model
    directory is touched; the directory is published as a set (see :func:`publish`). ``tuned`` (a
    study's best parameters, :func:`lcflow.train.hyperparameters.read_best`) goes over ``overrides`` and is recorded;
    ``backend`` (horovod or torch) is how the ranks talk, when a launcher started several.
    """
    out = Path(out)
    cls = model_class(model_name)
    params = hyperparameters.check(model_name, {**(overrides or {}), **((tuned or {}).get("params") or {})},
                                where="--set" if not tuned else f"--set and {tuned.get('file', 'the tuned parameters')}")
    deep_model = issubclass(cls, TorchModel)
    comm = connect(backend)
    if comm.rank != 0 and not deep_model:
        return {}
    data = prepare_data(cls, model_name, sample_paths, params, carve=deep_model)
    table = data.table
    model = cls(params, len(table.bands) + 1, table.steps, len(data.classes), table.bands, data.standardise,
                table.meta.get("time_steps"))
    if deep_model:
        out.mkdir(parents=True, exist_ok=True)
        model.comm, model.checkpoint = comm, out / CHECKPOINT
        model.fingerprint = fingerprint(model_name, sample_paths, model.params)
        model.targets = learning_targets(model, data.teacher)
        if comm.rank == 0:
            _start_from_trial(out / CHECKPOINT, tuned)
    started = time.perf_counter()
    history = model.fit(data.x, data.y, data.x_val, data.y_val)
    seconds = time.perf_counter() - started
    if deep_model and model.run_status.get("resumed_round"):
        seconds = model.run_status["seconds"]  # the run's rounds, whichever job trained them (a study's trial)
    classes = data.classes
    class_names = table.class_names()
    trained = TrainedModel(model, table.bands, table.steps, classes, {c: class_names.get(c, str(c)) for c in classes},
                           _colors(table, classes), data.standardise, table.meta.get("time_steps"))
    val = None
    if comm.rank == 0 and data.has_val:  # of the selected model, before a refit trains on these rows too
        val = {**_against_majority(trained, data.x_val, data.y_val, data.counts, "val"), **data.validation}
    refit = None
    if deep_model and model.params["refit"] and data.has_val:
        refit = _refit(model, data, history, out, comm)
        seconds += refit["seconds"]
    if comm.rank != 0:
        return {}
    metrics = {"model": model_name, "n_train": len(data.y), "n_val": int(len(data.y_val) if data.has_val else 0),
               "params": model.params, "world_size": comm.size, "launcher": comm.name, "train_seconds": seconds}
    if tuned:
        metrics["tuned"] = {k: tuned[k] for k in ("file", "study", "trial", "metric", "value", "params", "checkpoint")
                            if k in tuned}
    if hasattr(model, "size"):  # a forest: what a map job will hold, to size its memory from
        metrics["size"] = model.size()
    if deep_model:
        metrics["global_batch"] = int(model.params["batch_size"]) * comm.size
        if model.run_status.get("resumed_round"):  # a checkpoint's run went on (or had ended: nothing trained)
            metrics["resumed"] = dict(model.run_status)
        metrics["samples_per_s"] = float(np.mean([r["samples_per_s"] for r in history]))
    if refit is not None:
        metrics["refit"] = refit
    if val is not None:
        metrics["val"] = val
    elif hasattr(model, "oob_proba"):  # a forest without val rows: its out-of-bag votes
        metrics["val"] = {**_against_majority(trained, None, data.y, data.counts, "out-of-bag"),
                          "source": "out-of-bag samples"}
    test_part = table.split("test") if "split" in table.frame.columns else None
    if test_part is not None and len(test_part.frame):
        metrics["test"] = evaluate_table(trained, test_part, f"the test rows of {data.names}")
    publish(out, trained, history, metrics)
    for done in (CHECKPOINT, REFIT_CHECKPOINT):
        (out / done).unlink(missing_ok=True)  # finished: a later run starts afresh
    return metrics


def _refit(model, data: Prepared, history: list[dict], out: Path, comm) -> dict[str, Any]:
    """Every rank: train ``model`` afresh on the train and val rows together, as many passes as the
    selection run made up to its best round (:func:`lcflow.train.deep.refit_steps`). On a small table the
    val rows are a fifth of what there is to learn from; once they have chosen how long to train, they
    can teach too. The refit has its own checkpoint, so a job cut short resumes either run."""
    x = np.concatenate([data.x, data.x_val])
    y = np.concatenate([data.y, data.y_val])
    steps, best_round = deep.refit_steps(history, len(data.x), len(x))
    model.targets = learning_targets(model, forest_teacher.ForestTeacher(x, y, data.blocks, len(data.classes)))
    log.info("refit: %d steps on the %d train and %d val rows together (the selection run's best round: %d)",
             steps, len(data.x), len(data.x_val), best_round)
    started = time.perf_counter()
    rounds = model.refit(x, y, steps, out / REFIT_CHECKPOINT, f"{model.fingerprint}:refit:{steps}")
    seconds = time.perf_counter() - started
    if model.refit_status.get("resumed_round"):
        seconds = model.refit_status["seconds"]
    return {"steps": steps, "n_samples": int(len(y)), "selected_round": best_round,
            "seconds": seconds, "final_loss": float(rounds[-1]["loss"]) if rounds else None}


def learning_targets(model, teacher: forest_teacher.ForestTeacher) -> np.ndarray | None:
    """The teacher's rows' training targets where the model learns from a forest too (``distill``), else None
    (its labels). The model's ranks (``model.comm``) share the teacher's forests out."""
    share = float(model.params.get("distill", 0.0))
    if share <= 0:
        return None
    threads = int(model.params.get("threads", 0))
    return teacher.targets(share, int(model.params["seed"]), threads if threads > 0 else -1, model.comm)


def _start_from_trial(checkpoint: Path, tuned: dict[str, Any] | None) -> None:
    """Rank 0: give a run with no checkpoint of its own the study's best trial's (``tuned["checkpoint"]``).

    The trial trained these parameters on these samples; where its fingerprint and world size are this
    run's, fit takes its ended run and trains nothing (the model the study scored is the final one);
    otherwise fit names it another run's and trains afresh. An interrupted final run's own checkpoint
    is never replaced."""
    source = Path(tuned["checkpoint"]) if tuned and tuned.get("checkpoint") else None
    if source is None or checkpoint.exists():
        return
    if not source.is_file():
        log.info("the best trial's checkpoint %s is gone; training afresh", source)
        return
    with atomic_path(checkpoint) as tmp:
        shutil.copyfile(source, tmp)
    log.info("starting from the best trial's checkpoint %s (trial %s)", source, tuned.get("trial"))


def _observed(part: samples_table.SampleTable, split: str, names: str) -> samples_table.SampleTable:
    """Rows with at least one observation; the others are dropped, and the log says how many."""
    seen = part.observed()
    if not seen.all():
        log.warning("samples table(s) %s: %d of %d %s rows have no observation at all and are left out",
                    names, int((~seen).sum()), len(seen), split)
    return part.rows(seen)


def _against_majority(trained: TrainedModel, x_val: np.ndarray | None, y_val: np.ndarray, train_counts: np.ndarray,
                      split: str) -> dict[str, float]:
    """Validation accuracy beside the rate of always answering the commonest training class; a warning
    when the model does not beat it. Without ``x_val``: a forest's out-of-bag votes on the training rows."""
    proba = trained.model.oob_proba() if x_val is None else trained.model.predict_proba(x_val)
    accuracy = float((proba.argmax(1) == y_val).mean())
    majority = float((y_val == int(np.argmax(train_counts))).mean())
    if accuracy <= majority:
        log.warning("%s does not beat the majority class on %s: overall accuracy %.4f, majority rate %.4f",
                    trained.model.name, split, accuracy, majority)
    return {"overall_accuracy": accuracy, "majority_rate": majority, "beats_majority": accuracy > majority,
            "n_samples": int(len(y_val))}


def spatial_blocks(frame: pd.DataFrame) -> tuple[np.ndarray, tuple[str, str], float] | None:
    """Each row's spatial block (an integer per tile, year and square of BLOCK_M m, or BLOCK_PX px, at most a
    tenth of the samples' extent), the position columns used and the square's side; None when the table
    gives no sample positions (x/y, else row/col)."""
    coords = next(((a, b) for a, b in (("x", "y"), ("col", "row")) if {a, b} <= set(frame.columns)), None)
    if coords is None:
        return None
    keys = [frame[c].to_numpy() for c in ("tile", "year") if c in frame.columns]
    u, v = frame[coords[0]].to_numpy(float), frame[coords[1]].to_numpy(float)
    extent = max(np.ptp(u), np.ptp(v)) if len(frame) else 0.0
    side = min(BLOCK_M if coords[0] == "x" else BLOCK_PX, extent / 10) or 1.0
    keys += [np.floor(u / side), np.floor(v / side)]
    return pd.MultiIndex.from_arrays(keys).factorize()[0], coords, side


def carve_validation(part: samples_table.SampleTable, fraction: float, seed: int
                     ) -> tuple[samples_table.SampleTable, samples_table.SampleTable, dict[str, Any]]:
    """Set ``fraction`` of the training rows aside for validation, stratified by class and, where the
    table says where its samples lie (x/y, else row/col), in whole spatial blocks: neighbours of a
    validation sample do not train, so the selected round is not flattered by autocorrelation."""
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    frame = part.frame
    labels = frame["label"].to_numpy()
    folds = max(2, int(round(1 / fraction)))
    blocks = spatial_blocks(frame)
    val, method = None, "stratified by class (the table gives no sample positions)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # classes rarer than the number of folds
        if blocks is not None:
            groups, coords, side = blocks
            splitter = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)
            candidates = [fold for _, fold in splitter.split(frame, labels, groups)] if groups.max() >= folds else []
            val = _most_classes(labels, candidates, fraction)
            unit = "m" if coords[0] == "x" else "px"
            method = f"stratified by class, in spatial blocks of {side:g} {unit} ({coords[0]}/{coords[1]})"
            if val is None:
                method = (f"stratified by class (in spatial blocks of {side:g} {unit} no split kept every class in "
                          f"train and two in validation: the classes lie in too few blocks)")
        if val is None:
            splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
            _, val = next(splitter.split(frame, labels))
    is_val = np.zeros(len(frame), dtype=bool)
    is_val[val] = True
    info = {"source": "carved from train", "method": method, "fraction": fraction}
    return part.rows(~is_val), part.rows(is_val), info


def _most_classes(labels: np.ndarray, candidates: list[np.ndarray], fraction: float) -> np.ndarray | None:
    """Of the candidate validation rows that leave every class some training rows, those holding the
    most classes, each class's share nearest ``fraction``; None when none holds two classes."""
    classes, totals = np.unique(labels, return_counts=True)
    best, best_key = None, (1, 0.0)
    for rows in candidates:
        in_val = np.array([(labels[rows] == c).sum() for c in classes])
        if (in_val >= totals).any():
            continue
        key = ((in_val > 0).sum(), -float(np.abs(in_val / totals - fraction).max()))
        if key > best_key:
            best, best_key = rows, key
    return best


def publish(out: Path, trained: TrainedModel, history: list[dict], metrics: dict) -> None:
    """Write the model directory as a set: ``model.json`` (which readers and the workflow take as the
    sign of a finished model) is removed first and written last, and records the weights' checksum."""
    (out / META_FILE).unlink(missing_ok=True)
    _write_history(out / "history.csv", history)
    write_text(out / METRICS_FILE, json.dumps(metrics, indent=1))
    trained.save(out)


def model_input(cls, part: samples_table.SampleTable, standardise: Standardiser, where: str = "samples table"
                ) -> np.ndarray:
    """What a model of class ``cls`` trains on: prepared pixel series (with each row's position for a model
    that uses it), or prepared patches."""
    if cls.input_kind == "patch":
        return prepare_patches(part.patches(), standardise)[0]
    prepared = prepare(part.features(), standardise)[0]
    return with_position(prepared, part.latlon(where)) if cls.uses_position else prepared


def _write_history(path: Path, rows: list[dict]) -> None:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=keys)
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, buf.getvalue())
