"""The work a config asks for, in the units the rates are measured in: pixels, scenes, samples, models.
Counts a run has already made (its search's items, its sample tables) are taken where they exist;
the rest comes from the config, or from a stated assumption."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lcflow.defaults import default
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
    hpo_share: dict[str, float]  # per studied deep model: the share of its trials' rounds the pruner lets run
    remote: bool  # stage.mode remote: cubes read the catalogue over the network
    stage_on_slurm: bool
    said: list[str] = field(default_factory=list)  # where each count came from

    @property
    def tiles(self) -> list[str]:
        return sorted({t for t, _ in self.tile_years})

    @property
    def years(self) -> int:
        return len({y for _, y in self.tile_years})

    @property
    def n_train(self) -> int:
        return int(sum(self.samples.values()) * self.train_fraction)


def _get(config: dict, key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, dict) or node.get(part) is None:
            return default(key)
        node = node[part]
    return node


def from_config(config: dict, results: Path, scenes: float, classes: int) -> Work:
    """The work of ``config`` (merged and checked); ``scenes`` a tile-year and ``classes`` a tile-year's
    table where the run has not counted them yet under ``results``."""
    from lcflow.train.hyperparameters import TRAINING
    from lcflow.train.models import DEEP

    tile_years = [(t, int(y)) for t in config["tiles"] for y in config["years"]]
    resolution = float(_get(config, "cube.resolution"))
    aoi = config.get("aoi") or {}
    px = {}
    for tile, year in tile_years:
        box = aoi.get(tile)
        w, h = ((box[2] - box[0]), (box[3] - box[1])) if box else (S2_TILE_SIZE, S2_TILE_SIZE)
        px[(tile, year)] = math.ceil(w / resolution) * math.ceil(h / resolution)
    said = []
    found_scenes = {ty: _items(results / ty[0] / str(ty[1]) / "items.json") for ty in tile_years}
    demo = config.get("demo") or {}
    assumed_scenes = sum(demo["acquisitions"]) / 2 if demo.get("acquisitions") else scenes
    counted = [ty for ty, n in found_scenes.items() if n is not None]
    said.append(f"scenes: {len(counted)} tile-year(s) counted in their items.json, the others "
                f"{assumed_scenes:g} " + ("(the demo's acquisitions)" if demo.get("acquisitions") else "(assumed)"))
    per_class = int(_get(config, "sample.per_class"))
    found_samples = {ty: _rows(results / ty[0] / str(ty[1]) / "samples.parquet") for ty in tile_years}
    counted_rows = [ty for ty, n in found_samples.items() if n is not None]
    said.append(f"samples: {len(counted_rows)} tile-year(s) counted in their tables, the others {per_class} a class "
                f"x {classes} classes (assumed)")
    models = list(config["models"])
    deep = [m for m in models if m in DEEP]
    params = config.get("model_params") or {}
    training = {m: {k: int((params.get(m) or {}).get(k, TRAINING[k].default))
                    for k in ("epochs", "min_steps", "batch_size", "evaluations")} for m in deep}
    rf = {"n_estimators": int((params.get("rf") or {}).get("n_estimators", 300)),
          "min_samples_leaf": int((params.get("rf") or {}).get("min_samples_leaf", 1))}
    hpo = HpoSettings.from_config(config.get("hpo"))
    studied = [m for m in hpo.models if m in models]
    trials, workers = hpo.trials, hpo.workers
    share = {}
    if set(studied) & set(deep):
        from lcflow.budget.pruning import share_run

        share = {m: share_run(hpo.pruner, hpo.min_rounds, training[m]["evaluations"], hpo.reduction_factor, trials)
                 for m in studied if m in deep}
    stage_mode, where = _get(config, "stage.mode"), _get(config, "stage.where")
    indices = (config.get("cube") or {}).get("spectral_indices") or []
    return Work(tile_years, px,
                {ty: (n if n is not None else assumed_scenes) for ty, n in found_scenes.items()},
                {ty: (n if n is not None else per_class * classes) for ty, n in found_samples.items()},
                models, deep, len(_get(config, "cube.bands")) + len(indices), int(_get(config, "cube.time_steps")),
                float(_get(config, "sample.fractions")["train"]), rf, training,
                studied, trials, workers, share, stage_mode == "remote", where == "slurm", said)


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
