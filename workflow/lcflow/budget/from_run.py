"""Rates from a run on the site itself (``lcflow budget --rates-from RESULTS``): each stage's CPU a unit of
work as that run's jobs spent it (their benchmark files, a multi-rank job's ranks counted:
:mod:`lcflow.job_resources`), over the work its files show (cube pixels x scenes, sample rows, map
pixels, a model's metrics). A stage the run did not make keeps the rates it was given, and the rates say
which stages came from where.

A run's job is fitted whole: past a process's start-up, its CPU counts as work a unit, so a job of the run's
own size is projected as it ran. A small run (the demo, 65,536 px a tile-year) then overstates a whole
tile's fixed costs; a run of one whole tile-year on the site's nodes measures what a study's jobs will do.
A deep model's training rate is its samples a second a rank over the training's wall time (evaluations and
a refit included; on CPU ranks their CPU time where that is less: cores shared with other jobs), on a GPU
where its metrics name one.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from lcflow.budget.rates import affine
from lcflow.errors import LcflowError

#: stages whose jobs are priced by the job (their work does not grow with a count the files show)
PER_JOB = (
    "search",
    "stage",
    "assess",
    "quicklook",
    "change_figure",
    "design_sample",
    "learning_curve",
)
_TILE_YEAR = re.compile(r"^(?P<tile>\d{2}[A-Z]{3})_(?P<year>\d{4})(?:_(?P<rest>.+))?$")


class _Run:
    """A finished run's results folder: its jobs and the work its files show."""

    def __init__(self, results: Path) -> None:
        from lcflow import job_resources

        self.results = results
        if not (results / "benchmarks").is_dir():
            raise LcflowError(
                f"--rates-from {results}: no benchmarks folder: not the results folder of a finished run"
            )
        jobs = job_resources.read(results / "benchmarks")
        self.jobs: dict[str, dict[str, float]] = {}
        for row in jobs.itertuples():
            if row.cpu_s == row.cpu_s:  # NaN: a job faster than Snakemake's sampling
                self.jobs.setdefault(str(row.stage), {})[str(row.job)] = float(row.cpu_s)
        self.wall = {(str(r.stage), str(r.job)): float(r.wall_s) for r in jobs.itertuples()}
        self.ranks = {(str(r.stage), str(r.job)): max(int(r.ranks), 1) for r in jobs.itertuples()}
        self.px: dict[tuple[str, int], int] = {}
        for cube in sorted(results.glob("*/[0-9][0-9][0-9][0-9]/cube.tif")):
            self.px[(cube.parent.parent.name, int(cube.parent.name))] = _pixels(cube)

    def metrics(self, model: str) -> dict[str, Any] | None:
        path = self.results / "models" / model / "metrics.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def scenes(self, tile: str, year: int) -> int | None:
        from lcflow.budget.work import _items

        return _items(self.results / tile / str(year) / "items.json")

    def rows(self, tile: str, year: int) -> int | None:
        from lcflow.budget.work import _rows

        return _rows(self.results / tile / str(year) / "samples.parquet")

    def map_px(self, model: str):
        """The pixels of a ``predict`` job's map where the job is of ``model`` (else 0)."""

        def units(job: str) -> float:
            found = _tile_year(job)
            return float(self.px.get(found[:2], 0)) if found and found[2] == model else 0.0

        return units

    def first_px(self, tile: str) -> int | None:
        years = sorted(y for t, y in self.px if t == tile)
        return self.px[(tile, years[0])] if years else None


def _pixels(cube: Path) -> int:
    import rasterio

    with rasterio.open(cube) as ds:
        return ds.width * ds.height


def _tile_year(job: str) -> tuple[str, int, str] | None:
    m = _TILE_YEAR.match(job)
    return (m["tile"], int(m["year"]), m["rest"] or "") if m else None


def rates(results: Path, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with every stage ``results``' run measured taken from that run; ``measured`` says which."""
    run = _Run(results)
    startup = float(base["startup_cpu_s"])
    out = json.loads(json.dumps(base))  # a copy
    taken: list[str] = []

    def fit(stage: str, key: str, units_of, unit: str) -> None:
        spent = {job: cpu for job, cpu in run.jobs.get(stage, {}).items() if units_of(job)}
        units = sum(units_of(job) for job in spent)
        if spent and units:
            out["jobs"][key] = {
                **affine(sum(spent.values()), len(spent), units, startup),
                "unit": unit,
                "source": f"{len(spent)} {stage} job(s) of the run at {results}",
            }
            taken.append(key)

    def of_tile_year(count):
        def units(job: str) -> float:
            found = _tile_year(job)
            return float(count(found[0], found[1]) or 0) if found else 0.0

        return units

    for stage in PER_JOB:
        spent = run.jobs.get(stage, {})
        if spent:
            out["jobs"][stage] = {
                "fixed_cpu_s": sum(spent.values()) / len(spent),
                "cpu_s_per_unit": 0.0,
                "unit": "job",
                "source": f"{len(spent)} {stage} job(s) of the run at {results}",
            }
            taken.append(stage)
    fit(
        "cube",
        "cube",
        of_tile_year(lambda t, y: run.px.get((t, y), 0) * (run.scenes(t, y) or 0)),
        "px x scene",
    )
    fit("labels", "labels", lambda job: float(run.first_px(job) or 0), "px")
    fit("sample", "sample", of_tile_year(run.rows), "sample")

    def consistent_units(job: str) -> float:
        tile = job.split("_", 1)[0]
        return float((run.first_px(tile) or 0) * len({y for t, y in run.px if t == tile}))

    fit("consistent_maps", "consistent_maps", consistent_units, "px x year")
    mapped = {found[2] for job in run.jobs.get("predict", {}) if (found := _tile_year(job))}
    for model in sorted(mapped - {"rf", "blend"}):
        fit("predict", f"predict_{model}_cpu", run.map_px(model), "px")
    for model in sorted(set(run.jobs.get("train", {})) - {"rf", "blend"}):
        _deep_training(run, model, out, startup, taken)
    _forest(run, out, startup, taken)
    if not taken:
        raise LcflowError(
            f"--rates-from {results}: none of its benchmark files is of a stage a budget prices"
        )
    out["measured"] = (
        f"the run at {results} for {', '.join(taken)}; the rest as {base.get('measured', 'given')}"
    )
    return out


def _forest(run: _Run, out: dict, startup: float, taken: list[str]) -> None:
    """The run's forest: its fit's CPU a tree (its training job), its maps' CPU a pixel (its map jobs)."""
    metrics, cpu = run.metrics("rf"), run.jobs.get("train", {}).get("rf")
    if metrics is None or cpu is None:
        return
    trees = int(metrics["params"]["n_estimators"])
    forest = {
        "rows": int(metrics["n_train"]),
        "leaf": int(metrics["params"]["min_samples_leaf"]),
        "trees": trees,
        "fit_cpu_s_per_tree": max(cpu - startup, 0.1 * cpu) / trees,
        "source": f"the run at {run.results}",
    }
    of_rf = run.map_px("rf")
    maps = {job: spent for job, spent in run.jobs.get("predict", {}).items() if of_rf(job)}
    px = sum(of_rf(job) for job in maps)
    if not px:
        return
    spent = sum(maps.values())
    # the whole map job (reading, preparing, writing) as the forest's share: projected as it ran
    forest["map_cpu_s_per_px_300_trees"] = (
        max(spent - startup * len(maps), 0.1 * spent) / px * 300 / trees
    )
    out["forests"] = [forest]
    out["jobs"]["predict_rest"] = {
        "fixed_cpu_s": startup,
        "cpu_s_per_unit": 0.0,
        "unit": "px",
        "source": f"within the forest's map rate (the run at {run.results})",
    }
    taken.append("rf")


def _deep_training(run: _Run, model: str, out: dict, startup: float, taken: list[str]) -> None:
    """The run's training of ``model``: its samples a second a rank over the job's time (the module's doc)."""
    metrics, wall = run.metrics(model), run.wall.get(("train", model))
    if metrics is None or wall is None or not math.isfinite(wall) or "resumed" in metrics:
        return  # a resumed training did part of its work in an earlier job
    params, ranks = metrics["params"], int(metrics.get("world_size", 1))
    seen = max(
        int(params["epochs"]) * int(metrics["n_train"]),
        int(params.get("min_steps", 0)) * int(params["batch_size"]) * ranks,
    )
    device = str(metrics.get("device", "cpu"))
    busy = wall - startup
    if device == "cpu":
        # a rank that shared its cores with other jobs trained for its CPU time, not its wall time
        busy = min(busy, run.jobs.get("train", {}).get(model, math.inf) / ranks - startup)
    rate = seen / (ranks * max(busy, 1.0))
    if device == "cpu":
        out["deep_cpu"][model] = {
            "samples_per_s_per_rank": rate,
            "source": f"the run at {run.results}: {model} on {ranks} CPU rank(s)",
        }
    else:
        gpu = out.setdefault("gpu", {"train_samples_per_s_per_gpu": {}, "predict_px_s_per_gpu": {}})
        gpu["device"], gpu["batch"] = device, int(params["batch_size"])
        gpu["train_samples_per_s_per_gpu"][model] = rate
        gpu["file"] = f"the run at {run.results}"
        of_model = run.map_px(model)
        maps = [job for job in run.jobs.get("predict", {}) if of_model(job)]
        gpu_s = sum(
            max(run.wall[("predict", j)] - startup, 1.0) * run.ranks[("predict", j)] for j in maps
        )
        if gpu_s:  # its maps: pixels a second a GPU (a rank a GPU)
            gpu["predict_px_s_per_gpu"][model] = sum(of_model(j) for j in maps) / gpu_s
        if not gpu["predict_px_s_per_gpu"]:
            raise LcflowError(
                f"--rates-from {run.results}: {model} trained on {device}, but the run made no map of it "
                "and the rates given have no GPU map rate: run its maps too"
            )
        # a model neither measured projects as lstm's rate does (lcflow.budget.projection)
        gpu["train_samples_per_s_per_gpu"].setdefault("lstm", rate)
        gpu["predict_px_s_per_gpu"].setdefault(
            "lstm", next(iter(gpu["predict_px_s_per_gpu"].values()))
        )
    taken.append(f"train {model}")
