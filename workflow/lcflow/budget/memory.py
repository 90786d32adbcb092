"""The memory the forest's jobs hold, from the fits ``benchmarks/forest_fit_memory.py`` measured: a fit on
millions of rows, on every core of a node, can need more than the node has, which Slurm ends hours in with
an out-of-memory kill; the budget says so before the run."""

from __future__ import annotations

import math
from dataclasses import dataclass

from lcflow.budget.work import Work


@dataclass(frozen=True)
class Need:
    """The peak memory of one job, and what it is made of."""

    stage: str
    mb: float
    parts: str


def forest_nodes(rates: dict, rows: int, leaf: int, trees: int) -> tuple[float, str]:
    """The nodes of a forest of ``trees`` trees fitted on ``rows`` rows: the nodes a row a tree of the measured
    fit nearest ``leaf`` (min_samples_leaf, on a log scale), and which fit that was."""
    per_leaf = {int(k): v for k, v in rates["forest_memory"]["nodes_per_row_tree"].items()}
    near = min(per_leaf, key=lambda measured: abs(math.log(max(leaf, 1) / measured)))
    return per_leaf[near] * rows * trees, f"{per_leaf[near]:.3f} nodes a row a tree at leaf {near}"


def node_bytes(rates: dict, classes: int) -> float:
    """The bytes a fitted tree's node holds: scikit-learn's node record and a class-count row of doubles
    (measured at the benchmark's classes, the row scaled to ``classes``)."""
    m = rates["forest_memory"]
    return m["bytes_per_node"] + 8 * (classes - m["classes"])


def forest_fit(work: Work, rates: dict, threads: int, stage: str, classes: int) -> Need:
    """A forest's training (or a study trial's): the process, its sample tables as read, the prepared input,
    the trees it keeps and each thread's buffers.

    Args:
        work: the config's work (its rows, layers, steps, forest parameters).
        rates: the measured rates, with ``forest_memory``.
        threads: the threads the fit runs on (the cores its job holds).
        stage: the budget's stage the figure is for.
        classes: the classes a tree's node counts.
    """
    m = rates["forest_memory"]
    rows = work.n_train
    nodes, which = forest_nodes(
        rates, rows, int(work.rf["min_samples_leaf"]), int(work.rf["n_estimators"])
    )
    held = nodes * node_bytes(rates, classes) / 1e6
    table = sum(work.samples.values()) * (2 * work.layers * work.steps + 64) / 1e6
    prepared = rows * work.steps * (work.layers + 1) * 4 / 1e6
    buffers = (m["bytes_per_row"] + m["bytes_per_row_thread"] * threads) * rows / 1e6
    fit = m["fixed_mb"] + m["per_held_byte"] * held + buffers
    total = m["before_fit_mb"] + table + prepared + fit
    return Need(
        stage,
        total,
        f"tables {_gb(table)}, input {_gb(prepared)}, trees {_gb(held)} ({nodes:,.0f} nodes: {which}), "
        f"buffers {_gb(buffers)} at {threads} threads (measured at "
        f"{', '.join(map(str, m['threads_measured']))})",
    )


def forest_map(work: Work, rates: dict, classes: int) -> Need:
    """A forest's map job: the whole forest in memory (its windows beside it are small)."""
    m = rates["forest_memory"]
    nodes, which = forest_nodes(
        rates, work.n_train, int(work.rf["min_samples_leaf"]), int(work.rf["n_estimators"])
    )
    held = nodes * node_bytes(rates, classes) / 1e6
    return Need("predict rf", m["before_fit_mb"] + held, f"trees {_gb(held)} ({which})")


def needs(work: Work, rates: dict, node_cores: int, cpu_job_cores: int, classes: int) -> list[Need]:
    """The forest's jobs' peak memory (none without a forest or a measured ``forest_memory``).

    Args:
        work: the config's work.
        rates: the measured rates.
        node_cores: the cores of a CPU node (the training's threads).
        cpu_job_cores: the cores of a many-core CPU job (a study worker's threads).
        classes: the classes a tree's node counts.
    """
    if "rf" not in work.models or "forest_memory" not in rates:
        return []
    out = [forest_fit(work, rates, node_cores, "train rf", classes)]
    if "rf" in work.hpo_models:
        out.append(forest_fit(work, rates, cpu_job_cores, "hpo rf", classes))
    return [*out, forest_map(work, rates, classes)]


def _gb(mb: float) -> str:
    return f"{mb / 1000:.2f} GB" if mb >= 100 else f"{mb:.0f} MB"
