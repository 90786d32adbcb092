"""A blend's map from its members' stored class probabilities, window by window.

Each member has mapped the cube already (a network on GPU nodes, the forest on CPU nodes); the blend's
map averages the probabilities they stored (:data:`lcflow.maps.predict.PROBABILITY_SCALE` steps) instead
of running every member again. The stored values are rounded to 1/254, so the blend's probabilities are
within 1/508 of the mean of the exact ones, and a pixel where two classes' means are closer than that can
take the other class: ``lcflow predict`` on the blend's directory gives the exact mean, the same model.
"""

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import rasterio

from lcflow.common.atomic import write_text
from lcflow.common.progress import Progress
from lcflow.common.raster import Grid
from lcflow.defaults import default
from lcflow.errors import LcflowError
from lcflow.maps.map_windows import PROBABILITY_NODATA, PROBABILITY_SCALE, stored_arrays
from lcflow.maps.predict import publish
from lcflow.train.model_dirs import blend

log = logging.getLogger("lcflow.maps.blend")


def _member_rasters(
    paths: list[Path], members: list[str], classes: list[int], model_dir: Path
) -> list[Path]:
    """``paths`` in the order of the blend's members, each checked: a member's probabilities of the blend's
    classes, all on one grid."""
    by_model: dict[str, Path] = {}
    grid = None
    for path in paths:
        try:
            with rasterio.open(path) as src:
                tags = src.tags()
                model, codes = tags.get("model"), json.loads(tags.get("class_codes", "null"))
                here = Grid(src.crs, src.transform, src.width, src.height)
        except (rasterio.errors.RasterioIOError, json.JSONDecodeError) as exc:
            raise LcflowError(
                f"{path} is not a probabilities raster written by lcflow predict ({exc})"
            ) from None
        if model not in members:
            raise LcflowError(
                f"{path} holds the probabilities of model {model!r}, not of a member of blend {model_dir} "
                f"({', '.join(members)})"
            )
        if model in by_model:
            raise LcflowError(
                f"{path} and {by_model[model]} both hold member {model}'s probabilities: give each once"
            )
        if codes != classes:
            raise LcflowError(
                f"{path}: classes {codes}, where blend {model_dir} has {classes} (was {model} trained "
                "again since it mapped?)"
            )
        if grid is not None and here != grid:
            raise LcflowError(
                f"{path} is on another grid than {paths[0]}: give one tile-year's probabilities"
            )
        grid = here
        by_model[model] = path
    missing = [m for m in members if m not in by_model]
    if missing:
        raise LcflowError(
            f"blend {model_dir}: no probabilities of member(s) {', '.join(missing)} among "
            f"{', '.join(map(str, paths))}"
        )
    return [by_model[m] for m in members]


def _member_seconds(timings: list[Path], members: list[str]) -> tuple[float, int, bool]:
    """The members' mapping time of this tile-year (summed), their most ranks, whether any ran on a GPU."""
    seconds, ranks, gpu, seen = 0.0, 1, False, set()
    for path in timings:
        try:
            t = json.loads(Path(path).read_text())
            model, s = t["model"], float(t["seconds"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LcflowError(
                f"{path} is not a timing file written by lcflow predict ({type(exc).__name__}: "
                f"{exc})"
            ) from None
        if model not in members or model in seen:
            raise LcflowError(
                f"timing file {path} is of model {model!r}: give each member's ({', '.join(members)}) once"
            )
        seen.add(model)
        seconds, ranks, gpu = (
            seconds + s,
            max(ranks, int(t.get("ranks", 1))),
            gpu or t.get("device") == "gpu",
        )
    return seconds, ranks, gpu


def run(
    model_dir: str | Path,
    member_probabilities: list[str | Path],
    out_map: str | Path,
    out_confidence: str | Path,
    out_probabilities: str | Path | None = None,
    member_timings: list[str | Path] | None = None,
    out_timing: str | Path | None = None,
    block: int = default("predict.block_px"),
) -> None:
    """Write the blend's class map, confidence and (if asked) probabilities from its members' stored
    probabilities of one tile-year, published together as ``lcflow predict`` publishes them.

    Args:
        model_dir: the blend (its members and their weights).
        member_probabilities: each member's stored probabilities of the tile-year, in the blend's order.
        out_map: the class map to write.
        out_confidence: the confidence map to write.
        out_probabilities: the blend's probabilities to write; None: none.
        member_timings: each member's mapping time (JSON), added to the blend's own in ``out_timing``.
        out_timing: the timing to write (what the blend's map costs, its members' maps included).
        block: the window, pixels a side.
    """
    model_dir = Path(model_dir)
    trained = blend.described(model_dir)
    members = trained.model.params["members"]
    paths = _member_rasters(
        [Path(p) for p in member_probabilities], members, trained.classes, model_dir
    )
    if member_timings is not None:
        member_seconds, ranks, gpu = _member_seconds([Path(t) for t in member_timings], members)
    grid = Grid.of(paths[0])
    started = time.perf_counter()
    publish(
        trained,
        grid,
        _windows(paths, grid, block, trained.classes, out_probabilities is not None),
        out_map,
        out_confidence,
        out_probabilities,
    )
    seconds = time.perf_counter() - started
    if out_timing is not None and member_timings is not None:
        pixels = grid.width * grid.height
        total = member_seconds + seconds
        write_text(
            out_timing,
            json.dumps(
                {
                    "model": blend.NAME,
                    "pixels": pixels,
                    "seconds": round(total, 6),
                    "px_per_s": round(pixels / max(total, 1e-9), 1),
                    "ranks": ranks,
                    "device": "gpu" if gpu else "cpu",
                    "members_seconds": round(member_seconds, 6),
                    "blend_seconds": round(seconds, 6),
                },
                indent=1,
            )
            + "\n",
        )


def _windows(
    paths: list[Path], grid: Grid, block: int, classes: list[int], probabilities: bool
) -> Iterator[tuple[int, object, dict[str, np.ndarray]]]:
    windows = list(grid.windows(block))
    progress = Progress(log, f"blend {', '.join(p.name for p in paths)}", grid.width * grid.height)
    sources = [rasterio.open(p) for p in paths]
    try:
        for i, win in enumerate(windows):
            shape = (int(win.height), int(win.width))
            total = np.zeros((len(classes), *shape), dtype=np.float32)
            empty = np.zeros(shape, dtype=bool)
            for src in sources:
                stored = src.read(window=win)
                empty |= stored[0] == PROBABILITY_NODATA
                total += stored
            proba = (total / (len(sources) * PROBABILITY_SCALE)).reshape(len(classes), -1).T
            yield i, win, stored_arrays(proba, empty.ravel(), shape, classes, probabilities)
            progress.add(1, len(windows), shape[0] * shape[1])
    finally:
        for src in sources:
            src.close()
