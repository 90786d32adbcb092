"""Each rank's own CPU time and peak memory, written where the job's benchmark file is.

Snakemake's ``benchmark:`` measures the process tree it started. Under Slurm the ranks of a multi-rank job
are ``srun``'s step, not children of the job's shell, so the benchmark sees the launcher alone (a few CPU
seconds for a training of minutes). A rank started with :data:`VARIABLE` set (the rule's launcher sets it,
:func:`lcflow.launch.command`) writes its own ``getrusage`` at exit into that folder, one file a process;
:mod:`lcflow.job_resources` adds them up beside the benchmark, so the table and the rates a site measures
from its own runs count the ranks' work on every node.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import resource
import time
from collections.abc import Iterator
from pathlib import Path

from lcflow.common.atomic import write_text

#: the folder a process writes its usage into (set by the launcher of a multi-rank rule)
VARIABLE = "LCFLOW_RANK_USAGE"
#: the ranks' files of a job whose benchmark file is ``JOB.tsv``: the folder ``JOB.ranks`` beside it
SUFFIX = ".ranks"
#: seconds a rank's clock may stand apart from the clock of the node that wrote the benchmark file (NTP
#: keeps a cluster's nodes within milliseconds); files outside the job's time by more are an earlier run's
CLOCK_SLACK_S = 5.0


def folder(benchmark: str | Path) -> str:
    """The folder of the ranks' files of the job whose benchmark file is ``benchmark``."""
    return str(Path(benchmark).with_suffix(SUFFIX))


def _now_usage() -> dict[str, float]:
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return {
        "cpu_s": own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime,
        # Linux gives kB; the larger of this process's peak and its largest child's
        "max_rss_mb": max(own.ru_maxrss, children.ru_maxrss) / 1024,
    }


@contextlib.contextmanager
def recorded(command: str) -> Iterator[None]:
    """Within the block nothing changes; after it (an error or SIGTERM's unwinding too: their CPU was
    spent) this process's usage is written where :data:`VARIABLE` says, if it says."""
    where = os.environ.get(VARIABLE)
    started = time.time()
    try:
        yield
    finally:
        if where:
            _write(Path(where), command, started)


def _write(where: Path, command: str, started: float) -> None:
    from lcflow.common.path_guard import launched_rank

    host, pid = platform.node(), os.getpid()
    record = {
        "command": command,
        "rank": launched_rank(),
        "host": host,
        "pid": pid,
        "started": started,
        "ended": time.time(),
        **_now_usage(),
    }
    try:
        where.mkdir(parents=True, exist_ok=True)
        write_text(where / f"{host}-{pid}.json", json.dumps(record) + "\n")
    except OSError:
        pass  # a measurement, never a reason for a finished command to fail


def read(benchmark: Path, ended: float, wall_s: float) -> list[dict]:
    """The ranks' records of the job whose benchmark file is ``benchmark``, written ``ended`` (its time),
    after ``wall_s`` seconds of the job: those of processes that ran within the job's time (an earlier run's
    are left out). Unreadable files are skipped: a rank killed while it wrote."""
    where = Path(folder(benchmark))
    if not where.is_dir():
        return []
    first = ended - (wall_s if wall_s == wall_s else 0.0) - CLOCK_SLACK_S  # NaN wall: the end alone
    records = []
    for path in sorted(where.glob("*.json")):
        try:
            record = json.loads(path.read_text())
            start, end = float(record["started"]), float(record["ended"])
            float(record["cpu_s"]), float(record["max_rss_mb"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if start >= first and end <= ended + CLOCK_SLACK_S:
            records.append(record)
    return records


def summed(records: list[dict]) -> dict[str, float]:
    """The ranks together: their CPU seconds, and the peak memory of the node whose ranks held the most
    (their peaks added up: what a job's memory per node must hold)."""
    per_host: dict[str, float] = {}
    for r in records:
        per_host[r["host"]] = per_host.get(r["host"], 0.0) + float(r["max_rss_mb"])
    return {
        "cpu_s": sum(float(r["cpu_s"]) for r in records),
        "max_rss_mb": max(per_host.values(), default=0.0),
        "ranks": len(records),
        "nodes": len(per_host),
    }
