"""Apply a trained model to a whole cube, window by window: class map COG and confidence COG, and
optionally every class's probability (the evidence :mod:`lcflow.maps.consistent` weighs across years).

Patch models read each window with a halo of context (nodata beyond the tile, as when sampling). Started
by a parallel launcher (horovodrun, srun --mpi=pmix), the ranks share the windows: each maps a run of
consecutive windows (in the order the reader likes) on its own device, and rank 0 publishes one set of
files, the same as one process would write.
"""

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import rasterio
import rasterio.errors

from lcflow.common.atomic import publish_together, staging_prefix, write_text, writer_lock
from lcflow.common.raster import Bands, Grid, read_tag, staged_cog
from lcflow.defaults import default
from lcflow.errors import LcflowError
from lcflow.maps.map_windows import (
    PROBABILITY_NODATA,
    PROBABILITY_SCALE,
    WindowMapper,
    map_type,
)
from lcflow.train.model_dirs import saved_models
from lcflow.train.model_dirs.model_dir import TrainedModel
from lcflow.train.parallel import distributed

log = logging.getLogger("lcflow.maps.predict")


def cube_layout(cube: str | Path) -> tuple[list[str], int]:
    """Bands and number of time steps of a cube written by ``lcflow cube`` (from its tags)."""
    try:
        bands, steps = read_tag(cube, "bands"), read_tag(cube, "time_steps")
    except (rasterio.errors.RasterioIOError, ValueError) as exc:
        raise LcflowError(f"cube {cube} cannot be read as an lcflow cube ({exc})") from exc
    if not isinstance(bands, list) or not isinstance(steps, list):
        raise LcflowError(
            f"{cube} is not a cube written by lcflow cube (it has no 'bands' and 'time_steps' tags)"
        )
    return bands, len(steps)


def run(
    model_dir: str | Path,
    cube: str | Path,
    out_map: str | Path,
    out_confidence: str | Path,
    block: int = default("predict.block_px"),
    out_probabilities: str | Path | None = None,
    backend: str = default("distributed.backend"),
    out_timing: str | Path | None = None,
) -> None:
    """Write the class map and the confidence map of ``cube`` (and, if asked, the class probabilities,
    one band per class), published together when all are done; on several ranks, each maps its share.

    Args:
        model_dir: the trained model.
        cube: the tile-year's cube.
        out_map: the class map to write.
        out_confidence: the confidence map to write.
        block: the window, pixels a side.
        out_probabilities: the probabilities to write, one band a class; None: none.
        backend: the distributed backend the ranks were started with (horovod, torch).
        out_timing: the mapping's wall time and pixels per second (JSON) to write; None: none.
    """
    _distinct(
        {
            "map": out_map,
            "confidence map": out_confidence,
            "probabilities": out_probabilities,
            "timing file": out_timing,
        }
    )
    trained, cube_bands, steps = _fitting(model_dir, cube)
    grid = Grid.of(cube)
    windows = list(grid.windows(block))
    comm = distributed.connect(backend)
    trained.model.place(comm.local_rank)
    device = trained.model.device
    on_gpu = device is not None and device.type == "cuda"
    threads = preparing_threads(on_gpu, block * block, steps, len(trained.bands))
    mapper = WindowMapper(
        trained,
        cube,
        steps,
        cube_bands,
        probabilities=out_probabilities is not None,
        threads=threads,
    )
    if on_gpu:
        log.info(
            "on %s: %d thread(s) read and prepare windows ahead of the model",
            device,
            threads,
        )
    started = time.perf_counter()
    if comm.size == 1:
        publish(
            trained,
            grid,
            mapper.windows(windows, range(len(windows)), "", grid.width * grid.height),
            out_map,
            out_confidence,
            out_probabilities,
        )
        _write_timing(out_timing, trained, grid, time.perf_counter() - started, 1, on_gpu)
        return
    parts = Path(out_map).parent / f"{staging_prefix(Path(out_map))}ranks"
    with writer_lock(out_map) if comm.rank == 0 else contextlib.nullcontext():
        try:
            _map_share(mapper, windows, comm, parts)
            if comm.rank == 0:
                publish(
                    trained,
                    grid,
                    _from_parts(parts, windows),
                    out_map,
                    out_confidence,
                    out_probabilities,
                )
        finally:  # published or not (a rank that failed or was killed ends the others' collectives): no
            if comm.rank == 0:  # staged window stays behind
                shutil.rmtree(parts, ignore_errors=True)
        if comm.rank == 0:
            _write_timing(
                out_timing, trained, grid, time.perf_counter() - started, comm.size, on_gpu
            )


def _distinct(named: dict[str, str | Path | None]) -> None:
    """No two of the files to write are one file."""
    seen: dict[Path, str] = {}
    for what, path in named.items():
        if path is None:
            continue
        if Path(path).resolve() in seen:
            raise LcflowError(
                f"the {seen[Path(path).resolve()]} and the {what} would be the same file {path}: "
                "name different files"
            )
        seen[Path(path).resolve()] = what


def _fitting(model_dir: str | Path, cube: str | Path) -> tuple[TrainedModel, list[str], int]:
    """The trained model, and the cube's bands and steps, once the cube is found to hold what it takes."""
    trained = saved_models.load(model_dir)
    cube_bands, steps = cube_layout(cube)
    missing = [b for b in trained.bands if b not in cube_bands]
    if missing or steps != trained.steps:
        raise LcflowError(
            f"cube {cube} ({steps} steps, bands {cube_bands}) does not fit model {model_dir} "
            f"({trained.steps} steps, bands {trained.bands})"
        )
    return trained, cube_bands, steps


def _map_share(mapper: WindowMapper, windows: list, comm, parts: Path) -> None:
    """This rank's share of the windows, mapped into ``parts``: a staging directory of the map that rank 0
    makes (holding the map's writer lock, which removed what a killed run left) before any rank writes into
    it; every window mapped, or an error."""
    mine = share(len(windows), comm.rank, comm.size)
    pixels = sum(int(windows[i].height * windows[i].width) for i in mine)
    log.info(
        "rank %d of %d (local rank %d): windows %d..%d of %d",
        comm.rank,
        comm.size,
        comm.local_rank,
        mine.start,
        mine.stop - 1,
        len(windows),
    )
    if comm.rank == 0:
        parts.mkdir(parents=True, exist_ok=True)
    # no rank writes before it is made
    comm.allreduce_sum(np.zeros(1), name="lcflow.predict.staged")
    for i, _, arrays in mapper.windows(windows, mine, f" rank {comm.rank}/{comm.size}", pixels):
        tmp = parts / f".{i:06d}.{comm.rank}.npz"
        with tmp.open("wb") as fh:
            # numpy's stubs take a ** of arrays for its allow_pickle flag
            np.savez(fh, **arrays)  # type: ignore[arg-type]
        os.replace(tmp, parts / f"{i:06d}.npz")
    done = int(comm.allreduce_sum(np.array([len(mine)]), name="lcflow.predict.windows")[0])
    if done != len(windows):
        raise RuntimeError(
            f"predict {mapper.cube}: the ranks mapped {done} of {len(windows)} windows"
        )


def _write_timing(
    out: str | Path | None,
    trained: TrainedModel,
    grid: Grid,
    seconds: float,
    ranks: int,
    on_gpu: bool,
) -> None:
    """What mapping took, from the first window read to the published map, for the model comparison."""
    if out is None:
        return
    pixels = grid.width * grid.height
    write_text(
        out,
        json.dumps(
            {
                "model": trained.model.name,
                "pixels": pixels,
                "seconds": round(seconds, 6),
                "px_per_s": round(pixels / max(seconds, 1e-9), 1),
                "ranks": ranks,
                "device": "gpu" if on_gpu else "cpu",
            },
            indent=1,
        )
        + "\n",
    )


def share(n: int, rank: int, size: int) -> range:
    """The run of consecutive windows (of ``n``, in reading order) that ``rank`` of ``size`` maps: the
    shares differ by one window at most."""
    return range(rank * n // size, (rank + 1) * n // size)


#: memory the windows prepared ahead of the model may take, per process
PREPARED_AHEAD_BYTES = 2 << 30


def preparing_threads(
    on_gpu: bool, window_px: int, steps: int, bands: int, cpus: int | None = None
) -> int:
    """Threads that read and prepare windows ahead of the model: one beside a model that computes on
    the CPU (it takes the cores itself); on a GPU, which waits for the CPU's part, one per core of the
    process (at most 8), as many as :data:`PREPARED_AHEAD_BYTES` of prepared windows allow.

    Args:
        on_gpu: the model computes on a GPU.
        window_px: a window's pixels.
        steps: the cube's time steps.
        bands: the cube's bands a step.
        cpus: the cores of the process (None: those it may run on).
    """
    if not on_gpu:
        return 1
    cpus = cpus or len(os.sched_getaffinity(0))
    # prepared + raw
    per_window = window_px * steps * (bands + 1) * 4 + window_px * steps * bands * 2
    return max(1, min(cpus, 8, PREPARED_AHEAD_BYTES // per_window))


def _from_parts(parts: Path, windows: list) -> Iterator[tuple[int, object, dict[str, np.ndarray]]]:
    """The windows the ranks mapped, in order, from their files."""
    for i, win in enumerate(windows):
        with np.load(parts / f"{i:06d}.npz") as saved:
            yield i, win, {k: saved[k] for k in saved.files}


def publish(
    trained: TrainedModel,
    grid: Grid,
    mapped: Iterable[tuple[int, object, dict[str, np.ndarray]]],
    out_map: str | Path,
    out_confidence: str | Path,
    out_probabilities: str | Path | None,
) -> None:
    """The mapped windows written into staging COGs, published together once every window is in.

    Args:
        trained: the model (its classes, names and colours go into the maps).
        grid: the cube's grid.
        mapped: (index, window, arrays) of every window, arrays as :func:`stored_arrays` makes them.
        out_map: the class map to publish.
        out_confidence: the confidence map to publish.
        out_probabilities: the probabilities to publish; None: none.
    """
    dtype, nodata = map_type(trained.classes)
    tags = {
        "model": trained.model.name,
        "class_names": {str(k): v for k, v in trained.class_names.items()},
        "class_codes": trained.classes,
    }
    with contextlib.ExitStack() as stack:
        staged_map = stack.enter_context(
            staged_cog(
                out_map,
                grid,
                Bands(1, dtype, nodata, ["class"]),
                colors=trained.class_colors,
                names=trained.class_names,
                tags=tags,
                resampling="mode",
            )
        )
        staged_conf = stack.enter_context(
            staged_cog(
                out_confidence,
                grid,
                Bands(1, "uint8", 255, ["confidence"]),
                tags={"unit": "percent", "model": trained.model.name},
                resampling="average",
            )
        )
        staged_proba = None
        if out_probabilities is not None:
            staged_proba = stack.enter_context(
                staged_cog(
                    out_probabilities,
                    grid,
                    Bands(
                        len(trained.classes),
                        "uint8",
                        PROBABILITY_NODATA,
                        [f"p({c})" for c in trained.classes],
                    ),
                    tags={
                        **tags,
                        "class_colors": {str(k): list(v) for k, v in trained.class_colors.items()},
                    },
                )
            )
            staged_proba.dataset.scales = [1 / PROBABILITY_SCALE] * len(trained.classes)
        for _, win, arrays in mapped:
            if staged_proba is not None:
                staged_proba.dataset.write(arrays["probabilities"], window=win)
            staged_map.dataset.write(arrays["map"], 1, window=win)
            staged_conf.dataset.write(arrays["confidence"], 1, window=win)
        staged = [*staged_conf.finished(), *staged_map.finished()]  # the map last: the set's mark
        if staged_proba is not None:
            staged.insert(0, (staged_proba.finish(cog=False), staged_proba.final))
        publish_together(staged)
