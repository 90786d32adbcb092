"""A cube's windows through a model: each read (with a patch model's halo) and prepared ahead in background
threads, classified, and stored as the published files hold them (class, confidence, probabilities);
:mod:`lcflow.maps.predict` writes them."""

import logging
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import rasterio

from lcflow.common.position import window_latlon
from lcflow.common.prefetch import prefetched
from lcflow.common.progress import Progress
from lcflow.common.raster import read_with_halo
from lcflow.retrieve.composite import NODATA
from lcflow.train.model_dirs.model_dir import TrainedModel

log = logging.getLogger("lcflow.maps.predict")

#: class probabilities are stored as uint8 0..254 (scale 1/254; 255 = no data): storing them finer
#: changed no consistent-map pixel on the demo
PROBABILITY_SCALE = 254
PROBABILITY_NODATA = 255


def window_features(
    block: np.ndarray, steps: int, bands: list[str], cube_bands: list[str]
) -> np.ndarray:
    """(steps*bands, rows, cols) int16 cube block -> (steps, model bands, rows, cols) float with NaN gaps."""
    arr = block.reshape(steps, len(cube_bands), *block.shape[1:]).astype(np.float32)
    arr[arr == NODATA] = np.nan
    return arr[:, [cube_bands.index(b) for b in bands]]


def cube_features(
    block: np.ndarray, steps: int, bands: list[str], cube_bands: list[str]
) -> np.ndarray:
    """(steps*bands, rows, cols) int16 cube block -> (pixels, steps, model bands) float with NaN gaps."""
    arr = window_features(block, steps, bands, cube_bands)
    return np.moveaxis(arr.reshape(*arr.shape[:2], -1), 2, 0)


def map_type(classes: list[int]) -> tuple[str, int]:
    """The class map's pixel type and no-data value: uint8 (255) where every code fits, else uint16 (65535)."""
    return ("uint8", 255) if max(classes) < 255 else ("uint16", 65535)


class WindowMapper:
    """The windows in order: each read and prepared in a background thread (several ahead on a GPU), the
    model applied, its classes, confidence and probabilities as stored."""

    def __init__(
        self,
        trained: TrainedModel,
        cube: str | Path,
        steps: int,
        cube_bands: list[str],
        probabilities: bool,
        threads: int = 1,
    ):
        self.trained, self.cube, self.steps, self.cube_bands = trained, cube, steps, cube_bands
        self.probabilities, self.threads = probabilities, threads

    def windows(
        self, windows: list, indices: Iterable[int], who: str, pixels: int
    ) -> Iterator[tuple[int, object, dict[str, np.ndarray]]]:
        indices = list(indices)
        progress = Progress(log, f"predict {Path(self.cube).name}{who}", pixels)
        # context a patch model needs around each pixel; nodata beyond the tile
        h = self.trained.halo
        # a dataset per reading thread: GDAL handles are not shared
        opened, local = (
            [],
            threading.local(),
        )

        def load(i: int) -> tuple[np.ndarray, np.ndarray]:
            try:
                if not hasattr(local, "src"):
                    local.src = rasterio.open(self.cube)
                    opened.append(local.src)
                raw = read_with_halo(local.src, windows[i], h, NODATA)
                latlon = (
                    window_latlon(local.src.transform, local.src.crs, windows[i])
                    if self.trained.model.uses_position
                    else None
                )
                return self.trained.window_inputs(
                    window_features(raw, self.steps, self.trained.bands, self.cube_bands), latlon
                )
            except Exception as exc:
                raise self._failed(i, windows[i], who, exc) from exc

        try:
            for i, (prepared, empty) in prefetched(load, indices, ahead=self.threads):
                win = windows[i]
                try:
                    arrays = self.classify(prepared, empty, (int(win.height), int(win.width)))
                except Exception as exc:
                    raise self._failed(i, win, who, exc) from exc
                del prepared
                progress.add(1, len(indices), int(win.height * win.width))
                yield i, win, arrays
        finally:
            for src in opened:
                src.close()

    def _failed(self, i: int, win, who: str, exc: Exception) -> RuntimeError:
        return RuntimeError(
            f"predict {self.cube}:{who or ' one process'}, window {i} (rows "
            f"{int(win.row_off)}..{int(win.row_off + win.height) - 1}, cols "
            f"{int(win.col_off)}..{int(win.col_off + win.width) - 1}) failed: "
            f"{type(exc).__name__}: {exc}"
        )

    def classify(
        self, prepared: np.ndarray, empty: np.ndarray, shape: tuple[int, int]
    ) -> dict[str, np.ndarray]:
        return stored_arrays(
            self.trained.input_probabilities(prepared),
            empty,
            shape,
            self.trained.classes,
            self.probabilities,
        )


def stored_arrays(
    proba: np.ndarray,
    empty: np.ndarray,
    shape: tuple[int, int],
    classes: list[int],
    probabilities: bool,
) -> dict[str, np.ndarray]:
    """A window's map, confidence and (if asked) probability arrays as the published files store them.

    Args:
        proba: (pixels, classes) class probabilities.
        empty: (pixels,), True where the cube has no data.
        shape: the window's rows and columns.
        classes: the class codes of ``proba``'s columns.
        probabilities: make the probability array too.
    """
    dtype, nodata = map_type(classes)
    codes, confidence = np.asarray(classes)[proba.argmax(axis=1)], proba.max(axis=1)
    arrays: dict[str, np.ndarray] = {
        "map": np.where(empty, nodata, codes).astype(dtype).reshape(shape),
        "confidence": np.where(empty, 255, np.round(confidence * 100))
        .astype(np.uint8)
        .reshape(shape),
    }
    if probabilities:
        stored = np.where(empty[:, None], PROBABILITY_NODATA, np.round(proba * PROBABILITY_SCALE))
        arrays["probabilities"] = stored.T.astype(np.uint8).reshape(-1, *shape)
    return arrays
