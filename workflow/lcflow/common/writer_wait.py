"""A job that finds another live writer of its outputs waits for it, and ends without writing where that
writer left them complete.

A Snakemake controller killed while its Slurm jobs run leaves them running; the restarted controller
submits the same jobs again. Refused at once, such a job fails, and Snakemake then removes its outputs
"since they might be corrupted": the orphan's finished model among them. Waiting instead, the job takes
the lock once the orphan ends, and where every output is then there and newer than every input, it has
nothing to do. Under Slurm the wait is bounded by :data:`WAIT_VARIABLE` (default :data:`MINUTES`) and by
the job's own time limit; elsewhere a second writer is refused at once unless that variable is set.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from lcflow.common import atomic
from lcflow.errors import LcflowError

log = logging.getLogger(__name__)

WAIT_VARIABLE = "LCFLOW_WRITER_WAIT_MINUTES"
#: how long a Slurm job waits for another writer of its outputs (the profile's TRAIN_MINUTES default)
MINUTES = 240.0
#: seconds between two looks at the other writer's lock
POLL_S = 5.0

#: what a multi-rank command leaves to :func:`settle` once its ranks are connected (see :func:`defer`)
_pending: list[tuple[list[Path], list[Path], contextlib.ExitStack]] = []


class Made(Exception):
    """The outputs were made, complete, by the writer this process waited for: nothing to do."""


def bound_minutes(env: Mapping[str, str] | None = None) -> float:
    """Minutes to wait for another writer: the variable's value, else :data:`MINUTES` in a Slurm job, else 0."""
    given: Mapping[str, str] = os.environ if env is None else env
    text = given.get(WAIT_VARIABLE)
    if text is None:
        return MINUTES if "SLURM_JOB_ID" in given else 0.0
    try:
        minutes = float(text)
    except ValueError:
        minutes = -1.0
    if not 0 <= minutes <= 100_000:
        raise LcflowError(f"{WAIT_VARIABLE}={text!r}: not a number of minutes in [0, 100000]")
    return minutes


def complete(outputs: Sequence[Path], inputs: Sequence[Path]) -> bool:
    """Every output there (a folder not empty) and none older than the newest input."""
    try:
        if any(p.is_dir() and not any(p.iterdir()) for p in outputs):
            return False
        made = min(p.stat().st_mtime for p in outputs) if outputs else None
        newest = max((p.stat().st_mtime for p in inputs if p.exists()), default=0.0)
    except OSError:
        return False
    return made is not None and made >= newest


class _Taking:
    """The writer locks of ``outputs``, taken one by one into ``stack`` as their writers leave them."""

    def __init__(self, outputs: list[Path], stack: contextlib.ExitStack) -> None:
        self.outputs, self.stack, self.held, self.waited = outputs, stack, 0, False

    def step(self) -> str | None:
        """Take what is free; the output whose writer is alive (None: all taken)."""
        while self.held < len(self.outputs):
            final = self.outputs[self.held]
            try:
                self.stack.enter_context(atomic.writer_lock(final))
            except atomic.WriterBusy as busy:
                return str(busy)
            self.held += 1
        return None


def _say_waiting(busy: str, minutes: float) -> None:
    log.info(
        "%s; waiting for it, at most %.0f min (%s): a job of a controller that was stopped may still "
        "be making these outputs",
        busy.split(": wait for it")[0],
        minutes,
        WAIT_VARIABLE,
    )


def _too_long(busy: str, minutes: float) -> LcflowError:
    return LcflowError(
        f"{busy.split(': wait for it')[0]} still after {minutes:.0f} min ({WAIT_VARIABLE})"
    )


class _One:
    """A process on its own: rank 0, and a broadcast that is the identity."""

    rank = 0

    @staticmethod
    def broadcast_object(obj: str) -> str:
        return obj


def hold(outputs: list[Path], inputs: list[Path], stack: contextlib.ExitStack) -> bool:
    """Take every output's writer lock into ``stack``, waiting for a live writer as long as allowed; True
    where it was waited for and left the outputs complete (the caller then has nothing to write)."""
    return _take(_One(), outputs, inputs, stack)


def _made(taking: _Taking, outputs: list[Path], inputs: list[Path]) -> bool:
    if taking.waited and complete(outputs, inputs):
        log.info(
            "the writer waited for left %s complete and newer than the inputs: nothing to do, nothing "
            "written",
            ", ".join(map(str, outputs)),
        )
        return True
    if taking.waited:
        log.info("the writer waited for ended without complete outputs: making them")
    return False


def defer(outputs: list[Path], inputs: list[Path], stack: contextlib.ExitStack) -> None:
    """Leave the writer locks to :func:`settle`, called once a multi-rank command's ranks are connected:
    rank 0 waits then while the others wait in a broadcast, and all of them learn whether to go on."""
    _pending.append((outputs, inputs, stack))


def settle(comm) -> None:
    """Rank 0 takes what :func:`defer` left (waiting as :func:`hold` does, telling the other ranks at each
    look); every rank raises :class:`Made` where the writer waited for left the outputs complete."""
    if _pending and _take(comm, *_pending.pop()):
        raise Made()


def _take(comm, outputs: list[Path], inputs: list[Path], stack: contextlib.ExitStack) -> bool:
    """Rank 0 takes the locks, looking every POLL_S while another writer holds one (within the bound),
    and tells every rank at each look; True on every rank where the outputs were made meanwhile."""
    minutes = bound_minutes()
    taking = _Taking(outputs, stack) if comm.rank == 0 else None
    deadline = time.monotonic() + minutes * 60
    while True:
        state = "go"
        if taking is not None and (busy := taking.step()) is not None:
            if not minutes or time.monotonic() > deadline:
                state = "error: " + (busy if not minutes else str(_too_long(busy, minutes)))
            else:
                if not taking.waited:
                    _say_waiting(busy, minutes)
                    taking.waited = True
                state = "wait"
        if taking is not None and state == "go" and _made(taking, outputs, inputs):
            state = "made"
        state = comm.broadcast_object(state)
        if state == "wait":
            if comm.rank == 0:
                time.sleep(POLL_S)
            continue
        if state.startswith("error: "):
            raise LcflowError(state.removeprefix("error: "))
        return state == "made"
