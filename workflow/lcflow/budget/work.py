"""The work a config asks for, in the units the rates are measured in: pixels, scenes, samples, models.
Counts a run has already made (its search's items, its sample tables) are taken where they exist;
the rest comes from the config, or from a stated assumption."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lcflow.retrieve.mgrs import S2_TILE_SIZE
from lcflow.tune.hpo_settings import HpoSettings

#: a whole tile's pixels at 10 m, the size the whole-tile rates were measured at
WHOLE_TILE_PX = round(S2_TILE_SIZE / 10) ** 2


@dataclass
class Work:
    """What the workflow will process for a config."""

    tile_years: list[tuple[str, int]]
    px: dict[tuple[str, int], int]  # pixels of each tile-year's cube
    scenes: dict[tuple[str, int], float]
    samples: dict[tuple[str, int], float]
    models: list[str]
    deep: list[str]
    layers: int  # bands and spectral indices of a time step
    steps: int  # time steps of a year
    train_fraction: float
    rf: dict[str, Any]  # n_estimators, min_samples_leaf
    training: dict[str, dict[str, int]]  # per deep model: epochs, min_steps, batch_size
    hpo_models: list[str]
    hpo_trials: int
    hpo_workers: int
    # per studied deep model: the share of its trials' rounds the pruner lets run
    hpo_share: dict[str, float]
    remote: bool  # stage.mode remote: cubes read the catalogue over the network
    stage_on_slurm: bool
    said: list[str] = field(default_factory=list)  # where each count came from
    # files the stage-in stores a scene: one a band asset (a multi-band asset once) and the cloud mask's
    files_a_scene: int = 11

    @property
    def tiles(self) -> list[str]:
        return sorted({t for t, _ in self.tile_years})

    @property
    def years(self) -> int:
        return len({y for _, y in self.tile_years})

    @property
    def n_train(self) -> int:
        return int(sum(self.samples.values()) * self.train_fraction)

    @property
    def map_gb(self) -> float:
        """A model's maps of every tile-year: a class and a confidence byte a pixel."""
        return sum(self.px.values()) * 2 / 1e9


def from_config(config: dict, results: Path, scenes: float, classes: int) -> Work:
    """The work of ``config`` (merged and checked); ``scenes`` a tile-year and ``classes`` a tile-year's
    table where the run has not counted them yet under ``results``. Each section is read through its stage's
    settings, and each model's parameters through their check: the defaults are theirs."""
    from lcflow.labels.sample_settings import SampleSettings
    from lcflow.retrieve.cube_settings import CubeSettings
    from lcflow.retrieve.stage_settings import StageSettings
    from lcflow.train.models import DEEP, hyperparameters

    cube, sample = (
        CubeSettings.from_config(config.get("cube")),
        SampleSettings.from_config(config.get("sample")),
    )
    stage = StageSettings.from_config(config.get("stage"))
    tile_years = [(t, int(y)) for t in config["tiles"] for y in config["years"]]
    px = _pixels(tile_years, config.get("aoi") or {}, cube.resolution)
    said: list[str] = []
    found_scenes, found_samples = _scenes_and_samples(
        config.get("demo") or {}, tile_years, results, (scenes, sample.per_class, classes), said
    )
    models = list(config.get("models") or [])
    deep = [m for m in models if m in DEEP]
    given = config.get("model_params") or {}
    params = {
        m: hyperparameters.check(m, given.get(m), where=f"model_params.{m}")
        for m in models
        if m in hyperparameters.MODELS
    }
    training = {
        m: {k: int(params[m][k]) for k in ("epochs", "min_steps", "batch_size", "evaluations")}
        for m in deep
    }
    rf = (
        {k: int(params["rf"][k]) for k in ("n_estimators", "min_samples_leaf")}
        if "rf" in params
        else {}
    )
    hpo = HpoSettings.from_config(config.get("hpo"))
    studied = [m for m in hpo.models if m in models]
    share = {}
    if set(studied) & set(deep):
        from lcflow.budget.pruning import share_run

        share = {
            m: share_run(
                hpo.pruner,
                hpo.min_rounds,
                training[m]["evaluations"],
                hpo.reduction_factor,
                hpo.trials,
            )
            for m in studied
            if m in deep
        }
    return Work(
        tile_years,
        px,
        found_scenes,
        found_samples,
        models,
        deep,
        len(cube.bands) + len(cube.indices),
        cube.steps(),
        float(sample.fractions["train"]),
        rf,
        training,
        studied,
        hpo.trials,
        hpo.workers,
        share,
        stage.mode == "remote",
        stage.where == "slurm",
        said,
        _files_a_scene(cube),
    )


def _files_a_scene(cube) -> int:
    """The files a staged scene holds: an asset a band (those of one multi-band asset in one file), and the
    cloud mask's."""
    stacked = {b for bands in cube.asset_bands.values() for b in bands}
    shared = sum(1 for bands in cube.asset_bands.values() if set(bands) & set(cube.bands))
    return len(set(cube.bands) - stacked) + shared + 1


def _scenes_and_samples(
    demo: dict,
    tile_years: list[tuple[str, int]],
    results: Path,
    assumed: tuple[float, int, int],
    said: list[str],
) -> tuple[dict, dict]:
    """Each tile-year's scenes and sample rows, counted where the run has written them, else assumed
    (``assumed``: scenes a tile-year, rows a class, classes a table; ``demo``: the config's demo section,
    whose acquisitions are the scenes); where each came from, in ``said``."""
    scenes, per_class, classes = assumed
    assumed_scenes = sum(demo["acquisitions"]) / 2 if demo.get("acquisitions") else scenes
    found_scenes, counted = _counted(tile_years, results, "items.json", _items, assumed_scenes)
    said.append(
        f"scenes: {counted} tile-year(s) counted in their items.json, the others "
        f"{assumed_scenes:g} "
        + ("(the demo's acquisitions)" if demo.get("acquisitions") else "(assumed)")
    )
    found_samples, counted = _counted(
        tile_years, results, "samples.parquet", _rows, per_class * classes
    )
    said.append(
        f"samples: {counted} tile-year(s) counted in their tables, the others "
        f"{per_class} a class x {classes} classes (assumed)"
    )
    return found_scenes, found_samples


def _counted(
    tile_years: list[tuple[str, int]], results: Path, name: str, count, assumed: float
) -> tuple[dict[tuple[str, int], float], int]:
    """Each tile-year's figure, counted by ``count`` in its file ``name`` under ``results``, else ``assumed``;
    and how many were counted."""
    out: dict[tuple[str, int], float] = {}
    counted = 0
    for tile, year in tile_years:
        found = count(results / tile / str(year) / name)
        out[(tile, year)] = assumed if found is None else found
        counted += found is not None
    return out, counted


def _pixels(
    tile_years: list[tuple[str, int]], aoi: dict, resolution: float
) -> dict[tuple[str, int], int]:
    """Each tile-year's cube pixels: its area of interest's, else the whole tile's."""
    px = {}
    for tile, year in tile_years:
        box = aoi.get(tile)
        w, h = ((box[2] - box[0]), (box[3] - box[1])) if box else (S2_TILE_SIZE, S2_TILE_SIZE)
        px[(tile, year)] = math.ceil(w / resolution) * math.ceil(h / resolution)
    return px


def _items(path: Path) -> int | None:
    try:
        return len(json.loads(path.read_text())["features"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _rows(path: Path) -> int | None:
    if not path.is_file():
        return None
    import pyarrow.parquet as pq

    try:
        return pq.read_metadata(path).num_rows
    except (OSError, ValueError):
        return None
