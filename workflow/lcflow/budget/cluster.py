"""The cluster a budget is projected onto: the Slurm profile's SITE VALUES (what a job gets) and the
nodes a user expects to hold at once (not in the profile: the allocation's share)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from lcflow.errors import LcflowError
from lcflow.site_values import check

_SITE = re.compile(r'^\s*-\s*(\w+)\s*=\s*(?:int\()?site\("(\w+)",\s*"([^"]*)"\)')


@dataclass(frozen=True)
class Cluster:
    """What one job of each kind gets, and how many nodes run jobs at once."""

    name: str
    cpu_nodes: int  # CPU-partition nodes held at once
    gpu_nodes: int  # GPU-partition nodes held at once
    node_cores: int  # cores of a CPU node: the forest's training takes one whole
    cpu_job_cores: int  # cores of a CPU job that uses many (cube, sample, forest maps)
    gpus_per_node: int  # 0: deep models train and map on CPU ranks
    ranks_per_node: int  # ranks of a deep-model job on one node
    cores_per_rank: int
    train_nodes: int  # nodes of a training (or study worker) job
    predict_nodes: int  # nodes of a deep model's map job
    node_mem_mb: int  # memory of a CPU node
    billing: str = "core"  # core: cores held x wall; node: whole nodes x their cores x wall
    gpu_type: str = ""  # the GPU type the profile asks for ("": any)
    # a Slurm cluster: the workflow's local rules run on the login node, beside the jobs, billing nothing
    login_node: bool = False

    @property
    def gpu_node_cores(self) -> int:
        return self.ranks_per_node * self.cores_per_rank

    def slots(self, job_cores: int) -> int:
        """CPU jobs of ``job_cores`` cores that run at once."""
        return max(1, self.cpu_nodes * max(1, self.node_cores // max(1, job_cores)))


def site_values(profile: Path) -> dict[str, str]:
    """The profile's ``site("NAME", "default")`` values, each overridden by ``LCFLOW_SLURM_NAME`` where set,
    as the profile itself reads them."""
    config = profile / "config.yaml"
    if not config.is_file():
        raise LcflowError(
            f"--profile {profile}: no config.yaml there (the Slurm profile is profiles/slurm of "
            "lcflow's repository)"
        )
    values = {}
    for line in config.read_text().splitlines():
        if m := _SITE.match(line):
            values[m[2]] = os.environ.get(f"LCFLOW_SLURM_{m[2]}", m[3])
    return values


def from_profile(profile: Path, cpu_nodes: int, gpu_nodes: int) -> Cluster:
    """A Slurm cluster as the profile's site values describe its jobs."""
    site = site_values(profile)

    def number(name: str, fallback: int) -> int:
        try:  # the bounds the profile itself holds them to
            return int(check(name, str(site.get(name, fallback))))
        except LcflowError as exc:
            raise LcflowError(f"{profile}: {exc}") from None

    gpus = number("GPUS_PER_NODE", 4)
    return Cluster(
        f"{profile} ({cpu_nodes} CPU nodes, {gpu_nodes} GPU nodes at once)",
        cpu_nodes,
        gpu_nodes,
        number("NODE_CORES", 48),
        number("CPU_CORES", 8),
        gpus,
        number("TASKS_PER_NODE", gpus or 2),
        number("CPUS_PER_TASK", 12),
        number("TRAIN_NODES", 2),
        number("PREDICT_NODES", 1),
        number("NODE_MEM_MB", 96000),
        _choice(site, "BILLING", "core", profile),
        _choice(site, "GPU_TYPE", "", profile),
        login_node=True,
    )


def _choice(site: dict[str, str], name: str, fallback: str, profile: Path) -> str:
    """A site value that is text, held to the profile's own check."""
    try:
        return str(check(name, site.get(name, fallback)))
    except LcflowError as exc:
        raise LcflowError(f"{profile}: {exc}") from None


def this_machine(ranks: int = 2) -> Cluster:
    """One workstation as profiles/local runs on it: its cores, deep models on ``ranks`` CPU processes."""
    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    )
    mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1_000_000
    return Cluster(
        f"this machine ({cores} cores, {mem_mb / 1000:.0f} GB, no GPU)",
        1,
        1,
        cores,
        cores,
        0,
        ranks,
        1,
        1,
        1,
        mem_mb,
    )
