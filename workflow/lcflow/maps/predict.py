"""Apply a trained model to a whole cube, window by window: class map COG and confidence COG, and
optionally every class's probability (the evidence :mod:`lcflow.consistent_maps` weighs across years).

Patch models read each window with a halo of context (nodata beyond the tile, as when sampling).
"""

import contextlib
import logging
from pathlib import Path

import numpy as np
import rasterio
import rasterio.errors

from lcflow.common.atomic import publish_together
from lcflow.common.progress import Progress
from lcflow.common.raster import Grid, read_tag, read_with_halo, staged_cog
from lcflow.defaults import default
from lcflow.errors import LcflowError
from lcflow.retrieve.composite import NODATA
from lcflow.train.model_dir import TrainedModel

log = logging.getLogger("lcflow.maps.predict")


def window_features(block: np.ndarray, steps: int, bands: list[str], cube_bands: list[str]) -> np.ndarray:
    """(steps*bands, rows, cols) int16 cube block -> (steps, model bands, rows, cols) float with NaN gaps."""
    arr = block.reshape(steps, len(cube_bands), *block.shape[1:]).astype(np.float32)
    arr[arr == NODATA] = np.nan
    return arr[:, [cube_bands.index(b) for b in bands]]


def cube_features(block: np.ndarray, steps: int, bands: list[str], cube_bands: list[str]) -> np.ndarray:
    """(steps*bands, rows, cols) int16 cube block -> (pixels, steps, model bands) float with NaN gaps."""
    arr = window_features(block, steps, bands, cube_bands)
    return np.moveaxis(arr.reshape(*arr.shape[:2], -1), 2, 0)


def cube_layout(cube: str | Path) -> tuple[list[str], int]:
    """Bands and number of time steps of a cube written by ``lcflow cube`` (from its tags)."""
    try:
        bands, steps = read_tag(cube, "bands"), read_tag(cube, "time_steps")
    except (rasterio.errors.RasterioIOError, ValueError) as exc:
        raise LcflowError(f"cube {cube} cannot be read as an lcflow cube ({exc})") from exc
    if not isinstance(bands, list) or not isinstance(steps, list):
        raise LcflowError(f"{cube} is not a cube written by lcflow cube (it has no 'bands' and 'time_steps' tags)")
    return bands, len(steps)


#: class probabilities are stored as uint8 0..254 (scale 1/254; 255 = no data): storing them finer
#: changed no consistent-map pixel on the demo
PROBABILITY_SCALE = 254
PROBABILITY_NODATA = 255


def run(model_dir: str | Path, cube: str | Path, out_map: str | Path, out_confidence: str | Path,
        block: int = default("predict.block_px"), out_probabilities: str | Path | None = None) -> None:
    """Write the class map and the confidence map of ``cube`` (and, if asked, the class probabilities,
    one band per class), published together when all are done."""
    named = {"map": out_map, "confidence map": out_confidence, "probabilities": out_probabilities}
    seen: dict[Path, str] = {}
    for what, path in named.items():
        if path is None:
            continue
        if Path(path).resolve() in seen:
            raise LcflowError(f"the {seen[Path(path).resolve()]} and the {what} would be the same file {path}: "
                              "name different files")
        seen[Path(path).resolve()] = what
    trained = TrainedModel.load(model_dir)
    cube_bands, steps = cube_layout(cube)
    missing = [b for b in trained.bands if b not in cube_bands]
    if missing or steps != trained.steps:
        raise LcflowError(f"cube {cube} ({steps} steps, bands {cube_bands}) does not fit model {model_dir} "
                          f"({trained.steps} steps, bands {trained.bands})")
    grid = Grid.of(cube)
    dtype = "uint8" if max(trained.classes) < 255 else "uint16"
    nodata = 255 if dtype == "uint8" else 65535
    tags = {"model": trained.model.name, "class_names": {str(k): v for k, v in trained.class_names.items()},
            "class_codes": trained.classes}
    windows = list(grid.windows(block))
    progress = Progress(log, f"predict {Path(cube).name}", grid.width * grid.height)
    with contextlib.ExitStack() as stack:
        src = stack.enter_context(rasterio.open(cube))
        staged_map = stack.enter_context(staged_cog(
            out_map, grid, 1, dtype, nodata=nodata, colors=trained.class_colors, tags=tags, descriptions=["class"],
            resampling="mode"))
        staged_conf = stack.enter_context(staged_cog(
            out_confidence, grid, 1, "uint8", nodata=255, tags={"unit": "percent", "model": trained.model.name},
            descriptions=["confidence"], resampling="average"))
        staged_proba = None
        if out_probabilities is not None:
            staged_proba = stack.enter_context(staged_cog(
                out_probabilities, grid, len(trained.classes), "uint8", nodata=PROBABILITY_NODATA,
                tags={**tags, "class_colors": {str(k): list(v) for k, v in trained.class_colors.items()}},
                descriptions=[f"p({c})" for c in trained.classes]))
            staged_proba.dataset.scales = [1 / PROBABILITY_SCALE] * len(trained.classes)
        dst_map, dst_conf = staged_map.dataset, staged_conf.dataset
        h = trained.halo  # context a patch model needs around each pixel; nodata beyond the tile
        for win in windows:
            raw = read_with_halo(src, win, h, NODATA)
            proba, empty = trained.window_probabilities(window_features(raw, steps, trained.bands, cube_bands))
            codes, confidence = np.asarray(trained.classes)[proba.argmax(axis=1)], proba.max(axis=1)
            shape = (int(win.height), int(win.width))
            if staged_proba is not None:
                stored = np.where(empty[:, None], PROBABILITY_NODATA, np.round(proba * PROBABILITY_SCALE))
                staged_proba.dataset.write(stored.T.astype(np.uint8).reshape(-1, *shape), window=win)
            dst_map.write(np.where(empty, nodata, codes).astype(dtype).reshape(shape), 1, window=win)
            conf = np.where(empty, 255, np.round(confidence * 100)).astype(np.uint8)
            dst_conf.write(conf.reshape(shape), 1, window=win)
            progress.add(1, len(windows), shape[0] * shape[1])
        staged = [(staged_conf.finish(), staged_conf.final), (staged_map.finish(), staged_map.final)]
        if staged_proba is not None:
            staged.insert(0, (staged_proba.finish(cog=False), staged_proba.final))
        publish_together(staged)
