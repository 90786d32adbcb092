"""An Optuna study shared by many workers: its storage, sampler, pruner, and the budget they share.

Storage is Optuna's ``JournalStorage`` over a journal file in the study directory, locked with
``JournalFileOpenLock`` (an exclusive create, which Optuna documents for NFSv3 and later and which
works on Lustre and GPFS), or an RDB URL for large searches. Workers claim trials under a second lock
of the same kind, so that the number of trials finished or running never exceeds the budget however
many workers start at once. The journal storage has no heartbeat of its own: a worker holding a trial
touches a heartbeat file, and a trial whose heartbeat went stale (its worker was killed) is marked
failed by the next worker that claims, so it does not count and the study goes on.
"""

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock
from optuna.trial import TrialState

from lcflow.errors import LcflowError
from lcflow.train.parallel.distributed import node_name
from lcflow.tune.study_files import CLAIM, HEARTBEAT_DIR, JOURNAL, WORKERS_DIR

log = logging.getLogger("lcflow.tune")

#: seconds between heartbeats of a running trial, and after which a silent one counts as dead
HEARTBEAT_S, STALE_S = 10.0, 120.0
SAMPLERS = ("tpe", "random")
PRUNERS = ("successive_halving", "hyperband", "median", "none")
#: trials that count against the budget
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)

optuna.logging.set_verbosity(optuna.logging.WARNING)  # lcflow logs trials itself, one line each


def storage(study_dir: Path, url: str | None = None):
    """The study's storage: an RDB URL when given, else the journal file in ``study_dir`` (mended first:
    :func:`mend_journal`)."""
    if url:
        return optuna.storages.RDBStorage(url)
    path = study_dir / JOURNAL
    if path.exists():
        mend_journal(path)
    return JournalStorage(JournalFileBackend(str(path), lock_obj=JournalFileOpenLock(str(path))))


def mend_journal(path: Path) -> None:
    """A journal whose last record a killed worker left torn (no line end): the fragment moves to
    ``{journal}.torn`` (kept, and said in the log), where Optuna would write the next record straight
    after it and spoil both. Done under the journal's own lock, which a live writer holds while it
    appends. A record spoilt inside the file (by an lcflow that did not mend) is refused naming its line."""
    from optuna.storages.journal._file import get_lock_file

    with get_lock_file(JournalFileOpenLock(str(path))):
        data = path.read_bytes()
        whole = data[: data.rfind(b"\n") + 1]
        if len(whole) < len(data):
            torn = path.with_name(path.name + ".torn")
            with torn.open("ab") as fh:
                fh.write(data[len(whole) :] + b"\n")
            with path.open("r+b") as fh:
                fh.truncate(len(whole))
            log.warning(
                "study journal %s: its last record was torn (%d bytes: a worker killed while it wrote); "
                "moved to %s, the study goes on from the %d whole records",
                path,
                len(data) - len(whole),
                torn,
                whole.count(b"\n"),
            )
    for number, line in enumerate(whole.splitlines(), start=1):
        try:
            json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise LcflowError(
                f"study journal {path}: line {number} is not a whole record (a write cut short, then "
                "another written after it); move the study aside and tune afresh, or remove that "
                "line and the study's trials after it"
            ) from None


def make_sampler(name: str, seed: int, worker: str):
    """TPE (parallel-aware: running trials count as bad guesses) or random, seeded per worker so that
    workers started together do not draw the same first trials."""
    worker_seed = int.from_bytes(hashlib.sha256(f"{seed}:{worker}".encode()).digest()[:4], "little")
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=worker_seed, constant_liar=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=worker_seed)
    raise LcflowError(f"sampler {name!r}: expected one of {', '.join(SAMPLERS)}")


def make_pruner(name: str, min_rounds: int, max_rounds: int, reduction_factor: int):
    """Asynchronous successive halving (ASHA, the default), Hyperband, median, or none; rounds are the
    training's validation rounds."""
    if name == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=min_rounds, reduction_factor=reduction_factor
        )
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(
            min_resource=min_rounds,
            max_resource=max(max_rounds, min_rounds + 1),
            reduction_factor=reduction_factor,
        )
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=min_rounds)
    if name == "none":
        return optuna.pruners.NopPruner()
    raise LcflowError(f"pruner {name!r}: expected one of {', '.join(PRUNERS)}")


def open_study(study_dir: Path, name: str, sampler, pruner, url: str | None = None) -> optuna.Study:
    """Create the study, or load it to go on (a rerun continues, never starts over).

    Args:
        study_dir: the study's folder (its journal, unless ``url``).
        name: the study's name.
        sampler: Optuna's sampler.
        pruner: Optuna's pruner.
        url: an RDB storage URL; None: the journal file in ``study_dir``.
    """
    study_dir.mkdir(parents=True, exist_ok=True)
    (study_dir / HEARTBEAT_DIR).mkdir(exist_ok=True)
    return optuna.create_study(
        storage=storage(study_dir, url),
        study_name=name,
        direction="maximize",
        sampler=sampler,
        pruner=pruner,
        load_if_exists=True,
    )


def load_study(study_dir: Path, url: str | None = None, prefix: str | None = None) -> optuna.Study:
    """The latest study of the storage (of those whose name starts with ``prefix``), for summaries."""
    if not url and not (study_dir / JOURNAL).exists():
        raise LcflowError(
            f"study directory {study_dir}: no {JOURNAL} (run lcflow tune on it first)"
        )
    store = storage(study_dir, url)
    names = [s.study_name for s in optuna.get_all_study_summaries(store, include_best_trial=False)]
    if not names:
        raise LcflowError(f"study directory {study_dir}: the storage holds no study")
    mine = [n for n in names if n.startswith(prefix or "")]
    if not mine:
        raise LcflowError(
            f"study directory {study_dir}: no study named {prefix}... (studies: {', '.join(names)})"
        )
    return optuna.load_study(study_name=mine[-1], storage=store)


def counts(study: optuna.Study) -> dict[str, int]:
    """Trials by state, as lower-case names."""
    out = {s.name.lower(): 0 for s in TrialState}
    for t in study.get_trials(deepcopy=False):
        out[t.state.name.lower()] += 1
    return out


def finished(c: dict[str, int]) -> int:
    """Trials of :func:`counts` that count against the budget."""
    return sum(c[s.name.lower()] for s in FINISHED)


@contextlib.contextmanager
def _claim_lock(study_dir: Path) -> Iterator[None]:
    lock = JournalFileOpenLock(str(study_dir / CLAIM))
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def worker_lock(study_dir: Path, worker: str) -> Iterator[None]:
    """Hold worker id ``worker`` of the study in ``study_dir`` while the block runs; refused in one line
    where a live process holds it (a second worker started with the same ``--worker``)."""
    from lcflow.common.atomic import writer_lock

    # made here, so it stays whichever worker ends last (a study folder's members are the same every run)
    (study_dir / WORKERS_DIR).mkdir(parents=True, exist_ok=True)
    try:
        with writer_lock(study_dir / WORKERS_DIR / f"worker-{worker}"):
            yield
    except LcflowError as exc:
        if "another process is writing" not in str(exc):
            raise
        raise LcflowError(
            f"study {study_dir}: worker {worker} is running already, in another process; give each "
            "worker an id of its own (--worker), or wait for that one to end"
        ) from None


def _heartbeat(study_dir: Path, number: int) -> Path:
    return study_dir / HEARTBEAT_DIR / f"trial-{number}"


def fail_dead_trials(
    study: optuna.Study, study_dir: Path, worker: str, stale_s: float = STALE_S
) -> list[int]:
    """Mark failed the running trials whose worker is gone: this worker's own earlier ones (a worker
    id runs once at a time) and any whose heartbeat is older than ``stale_s``. Returns their numbers."""
    failed = []
    now = time.time()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        beat = _heartbeat(study_dir, t.number)
        age = now - beat.stat().st_mtime if beat.exists() else float("inf")
        if t.user_attrs.get("worker") == worker or age > stale_s:
            study.tell(t.number, state=TrialState.FAIL)
            beat.unlink(missing_ok=True)
            failed.append(t.number)
            log.warning(
                "trial %d of worker %s was left running by a worker that is gone (heartbeat %s): marked "
                "failed, it does not count",
                t.number,
                t.user_attrs.get("worker", "?"),
                "never" if age == float("inf") else f"{age:.0f} s old",
            )
    return failed


def claim(
    study: optuna.Study, study_dir: Path, budget: int, attrs: dict[str, Any]
) -> optuna.Trial | None:
    """A new trial of the study, or None when finished plus running trials already reach ``budget``."""
    with _claim_lock(study_dir):
        fail_dead_trials(study, study_dir, attrs["worker"])
        c = counts(study)
        if finished(c) + c["running"] >= budget:
            return None
        trial = study.ask()
        _heartbeat(study_dir, trial.number).touch()
    for key, value in attrs.items():
        trial.set_user_attr(key, value)
    return trial


class Heartbeat:
    """Touches a trial's heartbeat file from a thread while the trial runs."""

    def __init__(self, study_dir: Path, number: int, every_s: float = HEARTBEAT_S):
        self.path, self.every_s = _heartbeat(study_dir, number), every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"heartbeat-{number}")

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def __enter__(self) -> "Heartbeat":
        self.path.touch()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.path.unlink(missing_ok=True)


def worker_attrs(worker: str, world_size: int) -> dict[str, Any]:
    """What a trial records about who ran it."""
    return {
        "worker": worker,
        "world_size": world_size,
        "host": node_name(),
        "pid": os.getpid(),
        "slurm_job": os.environ.get("SLURM_JOB_ID", ""),
    }


def trained_by(trial) -> int:
    """The number of the trial that trained ``trial``'s model: itself, or the one a repeated draw took."""
    return int(trial.user_attrs.get("repeats", trial.number))


def plain_value(value: Any) -> Any:
    """numpy scalars to Python ones (YAML must stay plain)."""
    return value.item() if isinstance(value, np.generic) else value
