"""``lcflow tune`` and ``lcflow tune-summary``: hyperparameter optimisation of any model, as workers of one
study that can run on a laptop, as parallel processes, or as parallel multi-node Slurm jobs.

A worker reads and prepares the samples once, then trains one trial after another until the study's
budget is spent. In a worker of N ranks (started by horovodrun, mpirun or srun), rank 0 alone talks to
the study: it claims a trial and draws its parameters, broadcasts them, every rank trains its shard,
and after each validation round rank 0 reports the (allreduced) metric and broadcasts whether the
pruner stops the trial, so all ranks stop together.
"""

import contextlib
import errno
import json
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from lcflow.common.atomic import write_text
from lcflow.common.metrics import scores
from lcflow.defaults import default
from lcflow.errors import LcflowError
from lcflow.train.data.training_data import prepare_data
from lcflow.train.models import hyperparameters, model_class
from lcflow.train.models.torch_model import TorchModel
from lcflow.train.parallel.distributed import connect
from lcflow.train.training import fingerprint, learning_targets
from lcflow.tune import space as search_space
from lcflow.tune import study as studies
from lcflow.tune import study_files
from lcflow.tune.hpo_settings import HpoSettings
from lcflow.tune.study_files import CHECKPOINTS

log = logging.getLogger("lcflow.tune")

METRICS = ("overall_accuracy", "balanced_accuracy")
#: a round's history column for each metric
ROUND_COLUMN = {"overall_accuracy": "val_accuracy", "balanced_accuracy": "val_balanced_accuracy"}


def study_name(model: str, sample_paths: list[str], base: dict[str, Any], metric: str) -> str:
    """The study's name: the model and what the trials are compared on (samples, fixed parameters,
    metric), so a rerun on the same data continues it and new samples start a new one."""
    # how fast, not what is learnt
    fixed = {k: v for k, v in base.items() if k not in ("threads", "n_jobs", "predict_engine")}
    return f"{model}-{fingerprint(model, sample_paths, {**fixed, '_metric': metric})[:12]}"


def tune(
    model: str,
    sample_paths: list[str],
    study_dir: str | Path,
    settings: HpoSettings | None = None,
    *,
    base: dict[str, Any] | None = None,
    worker: str = "0",
    out: str | Path | None = None,
    backend: str = default("distributed.backend"),
) -> dict[str, Any]:
    """Run trials of ``model`` on ``study_dir``'s study until ``settings.trials`` are finished (by any worker)
    or ``settings.timeout_minutes`` have passed; write this worker's summary to ``out``. Returns the summary.

    Args:
        model: the model to tune.
        sample_paths: its samples tables (val rows are carved from train where there are none).
        study_dir: the study's folder (journal, heartbeats, checkpoints), shared by its workers.
        settings: the study's: budget, sampler, pruner, metric, storage, and the model's search space
            (``space_of(model)``; None: the model's default space). None: the schema's defaults.
        base: fixed model parameters; a searched one among them is the study's draw.
        worker: this worker's id, recorded in each trial.
        out: this worker's summary (JSON) to write; None: none.
        backend: the distributed backend of a deep model's ranks.
    """
    settings = settings or HpoSettings()
    study_dir = Path(study_dir)
    cls = model_class(model)
    given = dict(base or {})
    base = hyperparameters.check(model, given, where="--set")
    dims = search_space.parse(model, settings.space_of(model), where=f"hpo.space.{model}")
    searched_and_fixed = sorted({d.name for d in dims} & set(given))
    if searched_and_fixed:
        log.warning(
            "searched parameter(s) %s are also given fixed values; the study's draws are used",
            ", ".join(searched_and_fixed),
        )
    deep_model = issubclass(cls, TorchModel)
    comm = connect(backend)
    if comm.rank != 0 and not deep_model:
        return {}
    # a worker id runs once at a time: a second one would fail the first's live trial as abandoned
    with studies.worker_lock(study_dir, worker) if comm.rank == 0 else contextlib.nullcontext():
        asked = _Worker(model, cls, list(sample_paths), study_dir, settings, base, worker, out)
        try:
            return _work(asked, comm, dims)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise LcflowError(
                f"study {study_dir}: its file system is full ({os.strerror(exc.errno)}); the journal "
                "keeps every trial told before: free space, and the same command goes on from there"
            ) from None


class _Worker(NamedTuple):
    """What :func:`tune` was asked: the model, its samples, the study and this worker."""

    model: str
    cls: type
    sample_paths: list[str]
    study_dir: Path
    settings: HpoSettings
    base: dict[str, Any]
    worker: str
    out: str | Path | None


def _work(asked: _Worker, comm: Any, dims: list) -> dict[str, Any]:
    """:func:`tune`'s trials, one after another, once the worker holds its id (``comm``: its ranks;
    ``dims``: the search space)."""
    model, cls, sample_paths, study_dir, settings, base, worker, out = asked
    deep_model = issubclass(cls, TorchModel)
    data = prepare_data(cls, model, sample_paths, base, carve=True)
    job = _Job(model, cls, base, data, list(sample_paths), settings.metric)
    metric, trials = settings.metric, settings.trials
    name = study_name(model, sample_paths, base, metric)
    study = None
    summary: dict[str, Any] = {
        "model": model,
        "worker": worker,
        "study": name,
        "world_size": comm.size,
        "metric": metric,
        "trials": [],
        "space": [d.describe() for d in dims],
    }
    if comm.rank == 0:
        study = _opened(study_dir, name, settings, base, summary)
    started = time.perf_counter()
    while True:
        order, trial = None, None
        if comm.rank == 0:
            attrs = {**studies.worker_attrs(worker, comm.size), "metric": metric}
            order, trial = _next_trial(
                study, study_dir, trials, attrs, started, settings.timeout_minutes, dims
            )
        order = comm.broadcast_object(order)
        if order is None:
            break
        if "repeats" in order:
            result = _repeat_trial(order, trial, study, comm)
        else:
            result = _run_trial(job, order, trial, study, study_dir, comm)
        if comm.rank == 0:
            if deep_model:
                _keep_best_checkpoint(study, study_dir)
            summary["trials"].append(result)
            _log_trial(result, study, summary, trials, time.perf_counter() - started)
    if comm.rank != 0:
        return {}
    c = studies.counts(study)
    summary["study_trials"] = c
    summary["best_value"] = _best_value(study)
    summary["seconds"] = time.perf_counter() - started
    if out is not None:
        write_text(out, json.dumps(summary, indent=1))
    return summary


def _opened(study_dir: Path, name: str, settings: HpoSettings, base: dict[str, Any], summary: dict):
    """Rank 0: the study, opened (or created) with its sampler and pruner; its state in the log."""
    worker = summary["worker"]
    study = studies.open_study(
        study_dir,
        name,
        studies.make_sampler(settings.sampler, settings.seed, worker),
        studies.make_pruner(
            settings.pruner,
            settings.min_rounds,
            base.get("evaluations", 1),
            settings.reduction_factor,
        ),
        settings.storage,
    )
    c = studies.counts(study)
    log.info(
        "study %s in %s: %d finished, %d running, budget %d; worker %s, %d rank(s); space: %s",
        name,
        study_dir,
        studies.finished(c),
        c["running"],
        settings.trials,
        worker,
        summary["world_size"],
        "; ".join(summary["space"]),
    )
    return study


def _log_trial(result: dict, study, summary: dict, trials: int, elapsed: float) -> None:
    """Rank 0, after a trial: how it ended, the study's progress and this worker's rate."""
    done = studies.finished(studies.counts(study))
    value = result["value"] if result["value"] is not None else result["last_value"]
    log.info(
        "trial %d %s after %d round(s) (%.0f s): %s %.4f; study: %d of %d finished, best %.4f",
        result["number"],
        result["state"],
        result["rounds"],
        result["seconds"],
        summary["metric"],
        value,
        done,
        trials,
        _best_value(study),
    )
    mine = len(summary["trials"])
    log.info(
        "progress: %d of %d trials finished; this worker: %d trial(s) in %.0f s, %.0f s a trial",
        done,
        trials,
        mine,
        elapsed,
        elapsed / mine,
    )


def _best_value(study) -> float:
    try:
        return float(study.best_value)
    except ValueError:  # no completed trial yet
        return math.nan


def _next_trial(
    study,
    study_dir: Path,
    budget: int,
    attrs: dict,
    started: float,
    timeout_minutes: float | None,
    dims,
) -> tuple[dict | None, Any]:
    """Rank 0: claim the next trial and draw its parameters; (None, None) when the worker should stop."""
    worker = attrs["worker"]
    if timeout_minutes is not None and time.perf_counter() - started > 60 * timeout_minutes:
        log.info("worker %s: %g minutes have passed; no further trial", worker, timeout_minutes)
        return None, None
    trial = studies.claim(study, study_dir, budget, attrs)
    if trial is None:
        log.info(
            "worker %s: the study's budget of %d trials is finished or running; stopping",
            worker,
            budget,
        )
        return None, None
    drawn = {d.name: studies.plain_value(d.suggest(trial)) for d in dims}
    order = {"number": trial.number, "params": drawn}
    earlier = _complete_with_params(study, trial.params, attrs["world_size"])
    if earlier is not None:
        order["repeats"] = {"number": earlier.number, "value": float(earlier.value)}
    return order, trial


def _complete_with_params(study, params: dict, world_size: int):
    """The first complete trial of ``study`` drawn with exactly ``params`` on ``world_size`` ranks, or None.

    Why: a sampler drawing from a small space (a forest's choices) draws some points again, and the same
    parameters, rows, seed and ranks train the same model again (to the bit on a CPU), for the value the
    earlier trial had. Optuna's maintainers answer duplicated draws so (optuna/optuna#2021): the objective
    looks up the earlier trial."""
    return next(
        (
            t
            for t in study.get_trials(deepcopy=False, states=(studies.TrialState.COMPLETE,))
            if t.params == params and t.user_attrs.get("world_size") == world_size
        ),
        None,
    )


def _repeat_trial(order: dict, trial, study, comm) -> dict:
    """A trial whose parameters a complete trial had: it ends complete with that trial's value, untrained."""
    earlier = order["repeats"]
    log.info(
        "trial %d rank=%d size=%d params %s: those of complete trial %d; its value is taken, nothing is trained",
        order["number"],
        comm.rank,
        comm.size,
        json.dumps(order["params"], sort_keys=True),
        earlier["number"],
    )
    result = {
        "number": order["number"],
        "params": order["params"],
        "rounds": 0,
        "seconds": 0.0,
        "repeats": earlier["number"],
    }
    if comm.rank == 0:
        trial.set_user_attr("repeats", earlier["number"])
        study.tell(trial, earlier["value"])
        result.update(state="complete", value=earlier["value"])
    return result


def _keep_best_checkpoint(study, study_dir: Path) -> None:
    """Rank 0, after each trial: remove the checkpoints of the study's finished trials but its best complete
    one (the final training starts from it and trains nothing). Running trials' files are left to them, so
    workers that finish at once never remove a file another may yet need."""
    try:
        best = studies.trained_by(study.best_trial)
    except ValueError:  # no complete trial yet
        best = None
    done = {
        t.number
        for t in study.get_trials(
            deepcopy=False,
            states=(
                studies.TrialState.COMPLETE,
                studies.TrialState.PRUNED,
                studies.TrialState.FAIL,
            ),
        )
    }
    for path in (Path(study_dir) / CHECKPOINTS).glob(f"{study.study_name}-*.pt"):
        number = path.stem.rsplit("-", 1)[1]
        if number.isdigit() and int(number) in done and int(number) != best:
            path.unlink(missing_ok=True)


@dataclass(frozen=True)
class _Job:
    """What a worker trains its trials on, prepared once: the model, its fixed parameters and samples."""

    model: str
    cls: type
    base: dict[str, Any]
    data: Any  # the prepared samples (lcflow.train.data.training_data.prepare_data)
    sample_paths: list[str]
    metric: str


def _run_trial(job: _Job, order: dict, trial, study, study_dir: Path, comm) -> dict:
    """Train one trial on every rank (``trial``: rank 0's Optuna trial); rank 0 tells the study how it ended.

    A deep trial's run keeps a checkpoint as the final training does (same fingerprint): the final
    training of the best trial's parameters, on as many ranks, starts from it and trains nothing."""
    model, data, metric = job.model, job.data, job.metric
    number, drawn = order["number"], order["params"]
    params = hyperparameters.check(model, {**job.base, **drawn}, where=f"trial {number}")
    log.info(
        "trial %d rank=%d size=%d params %s",
        number,
        comm.rank,
        comm.size,
        json.dumps(drawn, sort_keys=True),
    )
    net = job.cls(
        params,
        len(data.table.bands) + 1,
        data.table.steps,
        len(data.classes),
        data.table.bands,
        data.standardise,
        data.table.meta.get("time_steps"),
    )
    column = ROUND_COLUMN[metric]
    pruned = {"value": False}
    if isinstance(net, TorchModel):
        net.comm = comm
        if comm.rank == 0:  # the rank that writes checkpoints
            net.checkpoint = study_files.trial_checkpoint(study_dir, study.study_name, number)
            net.fingerprint = fingerprint(model, job.sample_paths, net.params)

        def on_round(row: dict) -> bool:
            stop = None
            if comm.rank == 0:
                trial.report(row[column], step=int(row["round"]))
                stop = bool(trial.should_prune())
            stop = bool(comm.broadcast_object(stop))
            pruned["value"] = stop
            return stop

        net.on_round = on_round
        net.targets = learning_targets(net, data.teacher)
    started = time.perf_counter()
    # the heartbeat lasts until the trial is told: another worker fails a running trial that has none
    with studies.Heartbeat(study_dir, number) if comm.rank == 0 else contextlib.nullcontext():
        # an error, or SIGTERM (scancel, a time limit): the trial ends failed, not running
        try:
            history = net.fit(data.x, data.y, data.x_val, data.y_val)
        except BaseException:
            if comm.rank == 0:
                study.tell(trial, state=studies.TrialState.FAIL)
            raise
        result = {
            "number": number,
            "params": drawn,
            "rounds": len(history),
            "seconds": time.perf_counter() - started,
        }
        if comm.rank != 0:
            return result
        predicted = net.predict_proba(data.x_val).argmax(1)
        value = float(scores(data.y_val, predicted, {})[metric])
        if pruned["value"]:
            study.tell(trial, state=studies.TrialState.PRUNED)
            result.update(state="pruned", value=None, last_value=value)
        else:
            study.tell(trial, value)
            result.update(state="complete", value=value)
    return result
