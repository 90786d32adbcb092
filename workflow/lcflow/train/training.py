"""``lcflow train`` and ``lcflow evaluate``: any model, from any samples table."""

import csv
import hashlib
import io
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from lcflow.common.atomic import (
    atomic_path,
    publish_together,
    removed_if_left_empty,
    staging_dir,
    write_text,
)
from lcflow.defaults import default
from lcflow.train.data import forest_teacher
from lcflow.train.data.training_data import Prepared, class_colors, prepare_data
from lcflow.train.loop import recipe
from lcflow.train.model_dirs.evaluation import evaluate_table
from lcflow.train.model_dirs.model_dir import META_FILE, METRICS_FILE, TrainedModel
from lcflow.train.models import hyperparameters, model_class
from lcflow.train.models.torch_model import TorchModel
from lcflow.train.parallel.distributed import connect

log = logging.getLogger("lcflow.train")


CHECKPOINT = "checkpoint.pt"
REFIT_CHECKPOINT = "checkpoint_refit.pt"  # the refit on train and val rows (model_params refit)


#: parameters that do not change what a run trains (how fast it runs, how its outputs are read), so a
#: checkpoint is resumed whatever their value
NOT_TRAINING = ("threads", "weight_correction")


def fingerprint(model_name: str, sample_paths: list[str], params: dict[str, Any]) -> str:
    """What identifies a training run, so a checkpoint is only resumed by the same run."""
    h = hashlib.sha256(
        json.dumps(
            [model_name, {k: v for k, v in params.items() if k not in NOT_TRAINING}], sort_keys=True
        ).encode()
    )
    for p in sample_paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()


def train(
    model_name: str,
    sample_paths: list[str],
    out: str | Path,
    overrides: dict[str, Any] | None = None,
    tuned: dict[str, Any] | None = None,
    backend: str = default("distributed.backend"),
) -> dict:
    """Train ``model_name`` on the train split, select on val, score on test; write the model directory.

    Under a parallel launcher every rank trains its shard of the data (deep models) and rank 0 alone
    writes; a Random Forest is trained by rank 0 alone. Everything is checked before the model
    directory is touched; the directory is published as a set (see :func:`publish`).

    Args:
        model_name: the model (rf, lstm, ...).
        sample_paths: the samples tables.
        out: the model directory to write.
        overrides: parameters over the model's defaults (the config's ``model_params``).
        tuned: a study's best parameters (:func:`lcflow.train.models.hyperparameters.read_best`), over
            ``overrides``, and recorded.
        backend: how the ranks talk (horovod or torch), when a launcher started several.
    """
    out = Path(out)
    # Ctrl-C or an error before anything is written leaves no empty folder
    with removed_if_left_empty(out):
        return _train(model_name, sample_paths, out, overrides, tuned, backend)


def _prepare_run(
    model, sample_paths: list[str], out: Path, comm, data, tuned: dict[str, Any] | None
) -> None:
    """A deep model's run: its ranks, its checkpoint (a tuned run starts from its trial's) and fingerprint, and
    its targets (a forest teacher's, where it distills)."""
    out.mkdir(parents=True, exist_ok=True)
    model.comm, model.checkpoint = comm, out / CHECKPOINT
    model.fingerprint = fingerprint(model.name, sample_paths, model.params)
    model.targets = learning_targets(model, data.teacher)
    if comm.rank == 0:
        _start_from_trial(out / CHECKPOINT, tuned)


def _run_metrics(model, history: list[dict], comm, tuned: dict[str, Any] | None) -> dict[str, Any]:
    """What the run's metrics say of how it ran: the study it was tuned by, a forest's size, a deep model's
    global batch, resumption and speed."""
    metrics: dict[str, Any] = {}
    if tuned:
        metrics["tuned"] = {
            k: tuned[k]
            for k in ("file", "study", "trial", "metric", "value", "params", "checkpoint")
            if k in tuned
        }
    if hasattr(model, "size"):  # a forest: what a map job will hold, to size its memory from
        metrics["size"] = model.size()
    if isinstance(model, TorchModel):
        metrics["global_batch"] = int(model.params["batch_size"]) * comm.size
        # a checkpoint's run went on (or had ended: nothing trained)
        if model.run_status.get("resumed_round"):
            metrics["resumed"] = {k: v for k, v in model.run_status.items() if k != "loss_weights"}
        metrics["samples_per_s"] = float(np.mean([r["samples_per_s"] for r in history]))
        # what it trained on: a site's own rates (lcflow budget --rates-from) are a GPU's or a CPU's
        import torch  # loaded with the model already

        device = model.device
        metrics["device"] = (
            torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
        )
    return metrics


def _trained(model, data) -> TrainedModel:
    """The model with what a map needs of its samples: bands, steps, classes, their names and colours, the
    standardisation and the steps' dates."""
    table, classes = data.table, data.classes
    class_names = table.class_names()
    return TrainedModel(
        model,
        table.bands,
        table.steps,
        classes,
        {c: class_names.get(c, str(c)) for c in classes},
        class_colors(table, classes),
        data.standardise,
        table.meta.get("time_steps"),
    )


def _scores(trained: TrainedModel, data, val: dict | None) -> dict[str, Any]:
    """The model's scores: on the val rows (``val``, taken before a refit), else a forest's out-of-bag votes;
    and on the test rows."""
    scores: dict[str, Any] = {}
    # a forest's votes, each row's by the trees that did not see it
    out_of_bag = getattr(trained.model, "oob_proba", None)
    if val is not None:
        scores["val"] = val
    elif out_of_bag is not None:  # a forest without val rows: its out-of-bag votes
        scores["val"] = {
            **_against_majority(trained, out_of_bag(), data.y, data.counts, "out-of-bag"),
            "source": "out-of-bag samples",
        }
    table = data.table
    test_part = table.split("test") if "split" in table.frame.columns else None
    if test_part is not None and len(test_part.frame):
        scores["test"] = evaluate_table(trained, test_part, f"the test rows of {data.names}")
    return scores


def _train(
    model_name: str,
    sample_paths: list[str],
    out: Path,
    overrides: dict[str, Any] | None,
    tuned: dict[str, Any] | None,
    backend: str,
) -> dict:
    cls = model_class(model_name)
    params = hyperparameters.check(
        model_name,
        {**(overrides or {}), **((tuned or {}).get("params") or {})},
        where="--set" if not tuned else f"--set and {tuned.get('file', 'the tuned parameters')}",
    )
    deep_model = issubclass(cls, TorchModel)
    comm = connect(backend)
    if comm.rank != 0 and not deep_model:
        return {}
    data = prepare_data(cls, model_name, sample_paths, params, carve=deep_model)
    table = data.table
    model = cls(
        params,
        len(table.bands) + 1,
        table.steps,
        len(data.classes),
        table.bands,
        data.standardise,
        table.meta.get("time_steps"),
    )
    if deep_model:
        _prepare_run(model, sample_paths, out, comm, data, tuned)
    started = time.perf_counter()
    history = model.fit(data.x, data.y, data.x_val, data.y_val)
    seconds = time.perf_counter() - started
    if isinstance(model, TorchModel) and model.run_status.get("resumed_round"):
        # the run's rounds, whichever job trained them (a study's trial)
        seconds = model.run_status["seconds"]
    trained = _trained(model, data)
    val = None
    val_rows = data.val_rows
    # of the selected model, before a refit trains on these rows too
    if comm.rank == 0 and val_rows is not None:
        val = {
            **_against_majority(
                trained, trained.model.predict_proba(val_rows[0]), val_rows[1], data.counts, "val"
            ),
            **data.validation,
        }
    refit = None
    if deep_model and model.params["refit"] and val_rows is not None:
        refit = _refit(model, data, val_rows, history, out, comm)
        seconds += refit["seconds"]
    if comm.rank != 0:
        return {}
    metrics = {
        "model": model_name,
        "n_train": len(data.y),
        "n_val": len(val_rows[1]) if val_rows is not None else 0,
        "params": model.params,
        "world_size": comm.size,
        "launcher": comm.name,
        "train_seconds": seconds,
        **_run_metrics(model, history, comm, tuned),
    }
    if refit is not None:
        metrics["refit"] = refit
    metrics.update(_scores(trained, data, val))
    publish(out, trained, history, metrics)
    for done in (CHECKPOINT, REFIT_CHECKPOINT):
        (out / done).unlink(missing_ok=True)  # finished: a later run starts afresh
    return metrics


def _refit(
    model,
    data: Prepared,
    val_rows: tuple[np.ndarray, np.ndarray],
    history: list[dict],
    out: Path,
    comm,
) -> dict[str, Any]:
    """Every rank: train ``model`` afresh on the train and val rows together, as many passes as the
    selection run made up to its best round (:func:`lcflow.train.loop.recipe.refit_steps`). On a small table the
    val rows are a fifth of what there is to learn from; once they have chosen how long to train, they
    can teach too. The refit has its own checkpoint, so a job cut short resumes either run."""
    x = np.concatenate([data.x, val_rows[0]])
    y = np.concatenate([data.y, val_rows[1]])
    steps, best_round = recipe.refit_steps(history, len(data.x), len(x))
    model.targets = learning_targets(
        model, forest_teacher.ForestTeacher(x, y, data.blocks, len(data.classes))
    )
    log.info(
        "refit: %d steps on the %d train and %d val rows together (the selection run's best round: %d)",
        steps,
        len(data.x),
        len(val_rows[0]),
        best_round,
    )
    started = time.perf_counter()
    rounds = model.refit(x, y, steps, out / REFIT_CHECKPOINT, f"{model.fingerprint}:refit:{steps}")
    seconds = time.perf_counter() - started
    if model.refit_status.get("resumed_round"):
        seconds = model.refit_status["seconds"]
    return {
        "steps": steps,
        "n_samples": int(len(y)),
        "selected_round": best_round,
        "seconds": seconds,
        "final_loss": float(rounds[-1]["loss"]) if rounds else None,
    }


def learning_targets(model, teacher: forest_teacher.ForestTeacher) -> np.ndarray | None:
    """The teacher's rows' training targets where the model learns from a forest too (``distill``), else None
    (its labels). The model's ranks (``model.comm``) share the teacher's forests out."""
    share = float(model.params.get("distill", 0.0))
    if share <= 0:
        return None
    threads = int(model.params.get("threads", 0))
    return teacher.targets(
        share, int(model.params["seed"]), threads if threads > 0 else -1, model.comm
    )


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
    log.info(
        "starting from the best trial's checkpoint %s (trial %s)",
        source,
        (tuned or {}).get("trial"),
    )


def _against_majority(
    trained: TrainedModel,
    proba: np.ndarray,
    y_val: np.ndarray,
    train_counts: np.ndarray,
    split: str,
) -> dict[str, float]:
    """Validation accuracy (``proba``: the model's probabilities of the rows ``y_val``) beside the rate of
    always answering the commonest training class; a warning when the model does not beat it."""
    accuracy = float((proba.argmax(1) == y_val).mean())
    majority = float((y_val == int(np.argmax(train_counts))).mean())
    if accuracy <= majority:
        log.warning(
            "%s does not beat the majority class on %s: overall accuracy %.4f, majority rate %.4f",
            trained.model.name,
            split,
            accuracy,
            majority,
        )
    return {
        "overall_accuracy": accuracy,
        "majority_rate": majority,
        "beats_majority": accuracy > majority,
        "n_samples": int(len(y_val)),
    }


def publish(out: Path, trained: TrainedModel, history: list[dict], metrics: dict) -> None:
    """Write the model directory as a set: every file is written in a staging folder first (a full disk
    leaves the model that was there whole), then renamed into place, ``model.json`` (which readers and
    the workflow take as the sign of a finished model, and which records the weights' checksum) last."""
    with staging_dir(out / META_FILE) as stage:
        _write_history(stage / "history.csv", history)
        write_text(stage / METRICS_FILE, json.dumps(metrics, indent=1))
        trained.save(stage)
        names = ["history.csv", METRICS_FILE, trained.model.weights_file, META_FILE]
        publish_together([(stage / name, out / name) for name in names])


def _write_history(path: Path, rows: list[dict]) -> None:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=keys)
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, buf.getvalue())
