"""A config's work on a cluster at the measured rates: per stage its jobs, the minutes a job, how many run
at once, wall hours, core hours (cores held x wall, as Slurm bills), GPU hours, CPU work and disk."""

from __future__ import annotations

import math
from dataclasses import dataclass

from lcflow.budget import rates as measured
from lcflow.budget.cluster import Cluster
from lcflow.budget.work import WHOLE_TILE_PX, Work

#: the stages before the models, in turn; after them, the maps' checks and figures
BEFORE = ("search", "stage-in", "cube", "labels", "sample")
#: the rules among the stages that the Snakefile runs where Snakemake runs (its ``localrules``): on a Slurm
#: cluster the login node's work, billed nothing (the search and the stage-in too, as the config says)
LOCAL_RULES = ("learning_curve", "quicklook", "change_figure")


@dataclass
class Row:
    """One stage of the projection."""

    stage: str
    jobs: int
    job_s: float  # wall seconds of one job
    cores: int  # cores a job holds
    gpus: int  # GPUs a job holds
    at_once: int
    cpu_s: float  # CPU work of every job (what the demo's benchmark files measure)
    disk_gb: float  # what its outputs hold, uncompressed (an upper bound)
    source: str

    @property
    def wall_h(self) -> float:
        return math.ceil(self.jobs / self.at_once) * self.job_s / 3600 if self.jobs else 0.0

    @property
    def core_h(self) -> float:
        return self.jobs * self.job_s * self.cores / 3600

    @property
    def gpu_h(self) -> float:
        return self.jobs * self.job_s * self.gpus / 3600


@dataclass(frozen=True)
class Job:
    """One job of a stage: the CPU work it does, the cores and GPUs it holds, and its wall time where that is
    not its work spread over its cores (a network transfer, a GPU's)."""

    cpu_s: float
    cores: int
    gpus: int = 0
    wall_s: float | None = None


class _Rows(list):
    """The projection's rows, a stage at a time, each job's cores as the site bills them."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__()
        self.cluster = cluster

    def billed(self, cores: int, gpus: int) -> int:
        """The cores a job of ``cores`` cores (``gpus`` GPUs) is billed for: those, or with node billing
        its nodes' cores (a GPU job's nodes are the GPU partition's; the login node's jobs bill nothing)."""
        c = self.cluster
        if c.billing != "node" or not cores:
            return cores
        node = c.gpu_node_cores if gpus else c.node_cores
        return math.ceil(cores / node) * node

    def add(
        self, stage: str, jobs: int, job: Job, slots: int, source: str, disk_gb: float = 0.0
    ) -> None:
        """``jobs`` jobs of ``job``, ``slots`` of them at once; none: no row."""
        if jobs:
            cpu_s, cores = job.cpu_s, job.cores
            wall_s = cpu_s / max(cores, 1) if job.wall_s is None else job.wall_s
            if self.cluster.login_node and rule(stage) in LOCAL_RULES:
                cores = 0  # on the login node: a core's work, no job held
            self.append(
                Row(
                    stage,
                    jobs,
                    wall_s,
                    self.billed(cores, job.gpus),
                    job.gpus,
                    min(jobs, slots),
                    cpu_s * jobs,
                    disk_gb,
                    source,
                )
            )


def project(work: Work, rates: dict, cluster: Cluster) -> list[Row]:
    """The stages of ``work`` on ``cluster``."""
    rows = _Rows(cluster)
    _scenes_and_samples(work, rates, cluster, rows)
    if "rf" in work.models:
        _forest(work, rates, cluster, rows)
    for model in work.deep:
        _deep(model, work, rates, cluster, rows)
    _after_the_maps(work, rates, cluster, rows)
    return list(rows)


def _scenes_and_samples(work: Work, rates: dict, c: Cluster, rows: _Rows) -> None:
    """The stages before the models: search, stage-in, cubes, then labels and samples."""
    a, add = rates["assumed"], rows.add
    maps = len(work.tile_years)
    whole = WHOLE_TILE_PX
    add(
        "search",
        maps,
        Job(measured.job_cpu_s(rates, "search"), 0, wall_s=a["search_s"]),
        1,
        "network: assumed a search on the login node",
    )
    if not work.remote:
        staged_gb = [
            a["staged_gb_a_whole_tile_year"]
            * min(1.0, work.px[ty] / whole)
            * work.scenes[ty]
            / a["scenes"]
            for ty in work.tile_years
        ]
        add(
            "stage-in",
            maps,
            Job(
                measured.job_cpu_s(rates, "stage"),
                1 if work.stage_on_slurm else 0,
                wall_s=max(staged_gb) * 8 / a["stage_gbit"],
            ),
            1,
            f"{a['staged_gb_a_whole_tile_year']:.1f} GB a whole tile-year of {a['scenes']:g} scenes (assumed), "
            f"at {a['stage_gbit']:g} Gbit/s (assumed)",
            disk_gb=sum(staged_gb),
        )
    cube_cpu = [
        measured.job_cpu_s(rates, "cube", work.px[ty] * work.scenes[ty]) for ty in work.tile_years
    ]
    many = c.cpu_job_cores
    net_s = 0.0
    if work.remote:
        per_job = min(a["gbit_per_job"], a["site_gbit"] / min(maps, c.slots(many)))
        net_s = (
            max(
                work.scenes[ty] * a["scene_gb"] * min(1.0, work.px[ty] / whole)
                for ty in work.tile_years
            )
            * 8
            / per_job
        )
    px_step = sum(work.px.values()) * work.steps
    add(
        "cube",
        maps,
        Job(sum(cube_cpu) / maps, many, wall_s=max(max(cube_cpu) / many, net_s)),
        c.slots(many),
        rates["jobs"]["cube"]["source"]
        + (
            f"; network reads assumed ({net_s / 60:.0f} min a job)"
            if work.remote
            else "; staged scenes"
        ),
        disk_gb=px_step * (2 * work.layers + 1) / 1e9,
    )
    _labels_and_samples(work, rates, c, rows)


def _labels_and_samples(work: Work, rates: dict, c: Cluster, rows: _Rows) -> None:
    """The labels of each tile, the samples of each tile-year."""
    add, maps, many = rows.add, len(work.tile_years), c.cpu_job_cores
    tiles = work.tiles
    first = _first_years_px(work)
    add(
        "labels",
        len(tiles),
        Job(sum(measured.job_cpu_s(rates, "labels", first[t]) for t in tiles) / len(tiles), 1),
        c.slots(1),
        rates["jobs"]["labels"]["source"],
        disk_gb=sum(first.values()) * 2 / 1e9,
    )
    sample_cpu = sum(
        measured.job_cpu_s(rates, "sample", work.samples[ty]) for ty in work.tile_years
    )
    add(
        "sample",
        maps,
        Job(sample_cpu / maps, many),
        c.slots(many),
        rates["jobs"]["sample"]["source"],
        disk_gb=sum(work.samples.values()) * (2 * work.layers * work.steps + 64) / 1e9,
    )


def _first_years_px(work: Work) -> dict[str, int]:
    """Each tile's pixels in its first year (the labels' and the consistent maps' extent)."""
    return {t: work.px[(t, min(y for tt, y in work.tile_years if tt == t))] for t in work.tiles}


def _after_the_maps(work: Work, rates: dict, c: Cluster, rows: _Rows) -> None:
    """The consistent maps, then the figures, design samples and assessments of every map."""
    maps, tiles, years = len(work.tile_years), work.tiles, work.years
    first = _first_years_px(work)
    map_gb = work.map_gb
    consistent = [measured.job_cpu_s(rates, "consistent_maps", first[t] * years) for t in tiles]
    jobs = len(tiles) * len(work.models)
    # the jobs that start before the kernels are cached each compile them (numba's cache, on a fresh install)
    compiling = min(jobs, c.slots(1))
    compile_s = rates["jobs"]["consistent_maps"].get("compile_cpu_s", 0.0) * compiling
    rows.add(
        "consistent_maps",
        jobs,
        Job(sum(consistent) / len(tiles) + compile_s / jobs, 1),
        c.slots(1),
        rates["jobs"]["consistent_maps"]["source"]
        + (f"; the first {compiling} job(s) compile the kernels" if compile_s else ""),
        disk_gb=map_gb,
    )
    for stage, jobs in (
        ("change_figure", len(tiles) * len(work.models) * max(years - 1, 0)),
        ("quicklook", maps * len(work.models)),
        ("design_sample", maps),
        ("assess", maps * len(work.models)),
    ):
        rows.add(
            stage,
            jobs,
            Job(measured.job_cpu_s(rates, stage), 1),
            c.slots(1),
            rates["jobs"][stage]["source"],
        )


def _trials(work: Work, model: str) -> int | None:
    """The trials each worker of ``model``'s study runs (None: the model is not studied)."""
    return math.ceil(work.hpo_trials / work.hpo_workers) if model in work.hpo_models else None


def _forest(work: Work, rates: dict, c: Cluster, rows: _Rows) -> None:
    """The forest's study, training and maps."""
    n, many, maps = work.n_train, c.cpu_job_cores, len(work.tile_years)
    fit = measured.forest(rates, n, work.rf["min_samples_leaf"])
    fit_cpu = fit["fit_cpu_s_per_tree_here"] * work.rf["n_estimators"] + rates["startup_cpu_s"]
    told = f"a forest fit on {fit['rows']:,} rows ({fit['source']}), scaled to {n:,} rows"
    trials = _trials(work, "rf")
    if trials:
        rows.add(
            "hpo rf",
            work.hpo_workers,
            Job(fit_cpu * trials, many),
            work.hpo_workers,
            f"{trials} trials a worker, each {told} (unpruned)",
        )
    rows.add("train rf", 1, Job(fit_cpu, c.node_cores), 1, f"{told}, on a whole node (linear)")
    per_px = rates["jobs"]["predict_rest"]["cpu_s_per_unit"] + (
        fit["map_cpu_s_per_px_300_here"] * work.rf["n_estimators"] / 300
    )
    cpu = [
        rates["jobs"]["predict_rest"]["fixed_cpu_s"] + per_px * work.px[ty]
        for ty in work.tile_years
    ]
    rows.add(
        "predict rf",
        maps,
        Job(sum(cpu) / maps, many),
        c.slots(many),
        f"its forest as {told}; reading and writing: {rates['jobs']['predict_rest']['source']}",
        disk_gb=work.map_gb,
    )


def _deep(m: str, work: Work, rates: dict, c: Cluster, rows: _Rows) -> None:
    """A deep model's study, training, learning curve and maps, on GPUs where the cluster has them."""
    a, n, add = rates["assumed"], work.n_train, rows.add
    gpu = rates.get("gpu") if c.gpus_per_node else None
    ranks = c.train_nodes * (c.gpus_per_node or c.ranks_per_node)
    t = work.training[m]
    batch = t["batch_size"] * ranks
    # samples a training passes through, early stops aside
    seen = max(t["epochs"] * n, t["min_steps"] * batch)
    if gpu:
        per_gpu = gpu["train_samples_per_s_per_gpu"].get(
            m, gpu["train_samples_per_s_per_gpu"]["lstm"]
        )
        as_of = m if m in gpu["train_samples_per_s_per_gpu"] else "lstm (this model not measured)"
        job_s = seen / (per_gpu * ranks * a["scaling"]) + rates["startup_cpu_s"]
        source = f"{gpu['device']}: {as_of} at batch {gpu['batch']}, x{ranks} GPUs at {a['scaling']} (assumed)"
        cores, gpus, slots = (
            c.train_nodes * c.gpu_node_cores,
            ranks,
            max(1, c.gpu_nodes // c.train_nodes),
        )
    else:
        cpu_rank = rates["deep_cpu"].get(m, rates["deep_cpu"]["lstm"])
        job_s = seen / (cpu_rank["samples_per_s_per_rank"] * ranks) + rates["startup_cpu_s"]
        source = f"{cpu_rank['source']}, x{ranks} CPU ranks"
        cores, gpus, slots = (
            ranks * c.cores_per_rank,
            0,
            c.slots(c.ranks_per_node * c.cores_per_rank),
        )
    source += f"; {seen / max(n, 1):.0f} passes over {n:,} rows (early stopping ends sooner)"
    trials = _trials(work, m)
    if trials:
        share = work.hpo_share[m]
        add(
            f"hpo {m}",
            work.hpo_workers,
            Job(job_s * trials * share * cores, cores, gpus, job_s * trials * share),
            min(work.hpo_workers, slots),
            f"{trials} trials a worker, each a training as below; the pruner runs "
            f"{100 * share:.0f} % of their rounds (lcflow.budget.pruning)",
        )
    add(f"train {m}", 1, Job(job_s * cores, cores, gpus, job_s), 1, source)
    add(
        f"learning_curve {m}",
        1,
        Job(measured.job_cpu_s(rates, "learning_curve"), 1),
        1,
        rates["jobs"]["learning_curve"]["source"],
    )
    _deep_maps(m, work, rates, c, rows)


def _deep_maps(m: str, work: Work, rates: dict, c: Cluster, rows: _Rows) -> None:
    """A deep model's maps: on the GPU nodes at the measured rate, else on CPU ranks."""
    maps, map_gb = len(work.tile_years), work.map_gb
    gpu = rates.get("gpu") if c.gpus_per_node else None
    if gpu:
        per_gpu = gpu["predict_px_s_per_gpu"].get(m, gpu["predict_px_s_per_gpu"]["lstm"])
        gpus = c.predict_nodes * c.gpus_per_node
        job_s = [work.px[ty] / (per_gpu * gpus) + rates["startup_cpu_s"] for ty in work.tile_years]
        cores = c.predict_nodes * c.gpu_node_cores
        rows.add(
            f"predict {m}",
            maps,
            Job(sum(job_s) / maps * cores, cores, gpus, max(job_s)),
            max(1, c.gpu_nodes // c.predict_nodes),
            f"{gpu['device']}: {per_gpu:,.0f} px/s a GPU",
            disk_gb=map_gb,
        )
    else:
        stage = f"predict_{m}_cpu" if f"predict_{m}_cpu" in rates["jobs"] else "predict_lstm_cpu"
        cpu = [measured.job_cpu_s(rates, stage, work.px[ty]) for ty in work.tile_years]
        cores = c.predict_nodes * c.ranks_per_node * c.cores_per_rank
        rows.add(
            f"predict {m}",
            maps,
            Job(sum(cpu) / maps, cores),
            c.slots(cores),
            rates["jobs"][stage]["source"],
            disk_gb=map_gb,
        )


def critical_path(rows: list[Row]) -> tuple[float, list[str]]:
    """The wall hours of the longest chain of stages, and its stages: everything in turn but the forest's
    study, training and maps (CPU nodes) beside the deep models' (GPU nodes), which Snakemake runs at once.
    Stages of a chain are taken whole, one after another (no overlap of waves)."""
    wall = {row.stage: row.wall_h for row in rows}
    forest = [s for s in wall if s in ("hpo rf", "train rf", "predict rf")]
    deep = [
        s
        for s in wall
        if s.startswith(("hpo ", "train ", "learning_curve ", "predict ")) and s not in forest
    ]
    before = [s for s in wall if s in BEFORE]
    after = [s for s in wall if s not in (*before, *forest, *deep)]
    branch = max((forest, deep), key=lambda chain: sum(wall[s] for s in chain))
    path = [*before, *branch, *after]
    return sum(wall[s] for s in path), path


def _n(value: float) -> str:
    """A figure to three significant digits where it is small (a demo's hours), else to one decimal."""
    return f"{value:.1f}" if value >= 100 or value == 0 else f"{value:.3g}"


def rule(stage: str) -> str:
    """The workflow's rule that runs a stage's jobs (``train lstm``: ``train``; ``train rf``: ``train_rf``)."""
    name, _, model = stage.partition(" ")
    if name == "stage-in":
        return "stage"
    return f"{name}_rf" if model == "rf" else name


def by_stage(rows: list[Row]) -> dict[str, float]:
    """CPU seconds per stage as the run's benchmark files name them (``hpo``, ``train``, ``predict``, ...:
    a model's jobs together), to compare with ``lcflow job-resources``."""
    cpu: dict[str, float] = {}
    for r in rows:
        # the forest's rules keep their stage's benchmark folder
        name = rule(r.stage).removesuffix("_rf")
        cpu[name] = cpu.get(name, 0.0) + r.cpu_s
    return cpu


def table(rows: list[Row]) -> str:
    """The projection as a fixed-width table a proposal can quote, with its totals."""
    lines = [
        f"{'stage':22s} {'jobs':>5s} {'min a job':>10s} {'at once':>8s} {'wall h':>8s} {'core h':>9s} "
        f"{'GPU h':>7s} {'disk GB':>8s}  source"
    ]
    for r in rows:
        lines.append(
            f"{r.stage:22s} {r.jobs:5d} {_n(r.job_s / 60):>10s} {r.at_once:8d} {_n(r.wall_h):>8s} "
            f"{_n(r.core_h):>9s} {_n(r.gpu_h):>7s} {_n(r.disk_gb):>8s}  {r.source}"
        )
    total, path = critical_path(rows)
    lines.append(
        f"{'total':22s} {'':5s} {'':10s} {'':8s} {_n(total):>8s} {_n(sum(r.core_h for r in rows)):>9s} "
        f"{_n(sum(r.gpu_h for r in rows)):>7s} {_n(sum(r.disk_gb for r in rows)):>8s}  critical path: "
        f"{' > '.join(path)}"
    )
    lines.append(
        f"{'':22s} {'':5s} {'':10s} {'':8s} {_n(sum(r.wall_h for r in rows)):>8s} {'':9s} {'':7s} {'':8s}  "
        "(every stage one after another: an upper bound)"
    )
    return "\n".join(lines)
