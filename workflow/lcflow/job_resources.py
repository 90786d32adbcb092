"""Stage 7: what each job of a run took, from Snakemake's benchmark files: wall time, CPU time and peak memory per job
and per stage, as a table and a figure for the report, so that Slurm requests (``runtime``, ``mem_mb``) are
sized from measured jobs rather than guessed.

The workflow writes one benchmark file per job as ``benchmarks/{stage}/{job}.tsv``. A multi-rank job's
ranks also write their own usage beside it (:mod:`lcflow.common.rank_usage`): under Slurm they are srun's
step, which the benchmark (the process tree Snakemake started: the launcher) does not see. Such a job's CPU
time is the larger of the two, the ranks' summed; its peak memory the larger of the benchmark's and that
of the node whose ranks held the most.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcflow.common import path_guard, rank_usage
from lcflow.common.atomic import atomic_path, write_text
from lcflow.errors import LcflowError

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("lcflow")

COLUMNS = {"s": "wall_s", "cpu_time": "cpu_s", "max_rss": "max_rss_mb"}
#: the stages in the order a run reaches them (others follow, by name)
ORDER = (
    "synth",
    "search",
    "stage",
    "cube",
    "labels",
    "sample",
    "hpo",
    "train",
    "learning_curve",
    "predict",
    "consistent_maps",
    "change_figure",
    "quicklook",
    "design_sample",
    "assess",
)


def read(benchmarks: str | Path) -> pd.DataFrame:
    """One row per job: stage, job, wall_s, cpu_s, max_rss_mb (NaN where Snakemake could not sample the job:
    one faster than its sampling interval)."""
    import pandas as pd  # here, not at the top: every lcflow command imports this module (cli)

    benchmarks = Path(benchmarks)
    rows: list[dict[str, Any]] = []
    for path in sorted(benchmarks.glob("*/*.tsv")) + sorted(benchmarks.glob("*.tsv")):
        try:
            table = pd.read_csv(path, sep="\t", na_values=["NA", "-"])
        except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise LcflowError(
                f"benchmark file {path}: not a Snakemake benchmark table ({exc})"
            ) from None
        missing = [c for c in COLUMNS if c not in table.columns]
        if missing or table.empty:
            raise LcflowError(
                f"benchmark file {path}: no {', '.join(missing) or 'rows'} (not a Snakemake benchmark)"
            )
        last = table.iloc[-1]  # a job benchmarked with repeats: its last run
        stage = path.parent.name if path.parent != benchmarks else path.stem
        row = {
            "stage": stage,
            "job": path.stem,
            **{new: float(last[old]) for old, new in COLUMNS.items()},
        }
        rows.append({**row, **_with_ranks(path, row)})
    if not rows:
        raise LcflowError(f"{benchmarks}: no benchmark files (benchmarks/STAGE/JOB.tsv)")
    rank = {stage: i for i, stage in enumerate(ORDER)}
    rows.sort(key=lambda r: (rank.get(r["stage"], len(ORDER)), r["stage"], r["job"]))
    return pd.DataFrame(rows)


def _with_ranks(benchmark: Path, row: dict[str, Any]) -> dict[str, Any]:
    """``row``'s CPU and memory with its ranks' own (where they wrote any), and how many ranks counted."""
    records = rank_usage.read(benchmark, benchmark.stat().st_mtime, row["wall_s"])
    if not records:
        return {"ranks": 0}
    ranks = rank_usage.summed(records)
    return {
        "cpu_s": _larger(ranks["cpu_s"], row["cpu_s"]),
        "max_rss_mb": _larger(ranks["max_rss_mb"], row["max_rss_mb"]),
        "ranks": ranks["ranks"],
    }


def _larger(measured: float, benchmark: float) -> float:
    """The larger figure; the ranks' alone where the benchmark has none (NaN: a job too fast to sample)."""
    return measured if benchmark != benchmark else max(measured, benchmark)


def by_stage(jobs: pd.DataFrame) -> pd.DataFrame:
    """Per stage: how many jobs, their total and longest wall time, total CPU time and highest peak memory, and
    the ranks whose own measurement counted (0: the benchmark files alone)."""
    import pandas as pd

    grouped = jobs.groupby("stage", sort=False)
    table = pd.DataFrame(
        {
            "jobs": grouped.size(),
            "wall_s_total": grouped["wall_s"].sum(),
            "wall_s_max": grouped["wall_s"].max(),
            "cpu_s_total": grouped["cpu_s"].sum(min_count=1),
            "max_rss_mb": grouped["max_rss_mb"].max(),
            "ranks_measured": grouped["ranks"].sum(),
        }
    )
    return table.reset_index()


def figure(jobs: pd.DataFrame, out: str | Path) -> None:
    """Each stage's jobs: wall time and peak memory, one dot a job, the stage's longest and highest as bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = list(dict.fromkeys(jobs["stage"]))
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.45 * len(stages) + 1.6), sharey=True)
    for ax, column, label in (
        (axes[0], "wall_s", "wall time per job (s)"),
        (axes[1], "max_rss_mb", "peak memory per job (MB, RSS)"),
    ):
        for y, stage in enumerate(stages):
            values = jobs.loc[jobs["stage"] == stage, column].dropna()
            if values.empty:
                continue
            ax.barh(y, values.max(), color="#c6dbef")
            ax.plot(values, [y] * len(values), "o", color="#08519c", markersize=3)
            ax.annotate(
                f"{values.max():.0f}",
                (values.max(), y),
                xytext=(3, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
            )
        ax.set_xlabel(label)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(stages)), stages)
    axes[0].invert_yaxis()
    fig.suptitle(f"{len(jobs)} jobs, {jobs['wall_s'].sum() / 60:.1f} min of wall time in all")
    fig.tight_layout()
    with atomic_path(out, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)


def write(
    benchmarks: str | Path, out: str | Path, figure_out: str | Path | None = None
) -> pd.DataFrame:
    """The per-stage table (TSV) and, given ``figure_out``, the figure; returns the per-job rows."""
    jobs = read(benchmarks)
    write_text(out, by_stage(jobs).to_csv(sep="\t", index=False, float_format="%.2f"))
    if figure_out:
        figure(jobs, figure_out)
    return jobs


def cmd_job_resources(a) -> None:
    jobs = write(a.benchmarks, a.out, a.figure)
    log.info("%d jobs in %d stages -> %s", len(jobs), jobs["stage"].nunique(), a.out)


def register(command) -> None:
    """``lcflow job-resources``; ``command(name, help, **kw)`` makes its sub-parser."""
    p = command(
        "job-resources",
        "wall time, CPU time and peak memory of every stage's jobs, from Snakemake's "
        "benchmark files",
    )
    p.add_argument(
        "--benchmarks",
        required=True,
        type=path_guard.input_dir,
        help="folder of benchmark files, STAGE/JOB.tsv",
    )
    p.add_argument(
        "--out", required=True, type=path_guard.output_file, help="per-stage table (TSV) to write"
    )
    p.add_argument(
        "--figure",
        type=path_guard.output_file,
        help="figure (PNG) to write: each job's wall time and peak memory by stage",
    )
    p.set_defaults(func=cmd_job_resources)
