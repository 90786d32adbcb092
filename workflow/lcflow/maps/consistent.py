"""The consistent annual map series of one tile and model, from each year's class probabilities.

Reads the probability rasters ``lcflow predict --probabilities`` wrote for every year, window by
window (with a halo of context for the minimum change patch), finds each pixel's class sequence
(:mod:`lcflow.maps.hmm`) and writes, per year, the consistent class map and its confidence (COGs),
per pair of consecutive years a change map of from-to codes (:mod:`lcflow.maps.change`), and a summary:
agreement, change fraction and change matrix (ha) of the raw and the consistent maps; against truth
rasters where given (the demo), overall accuracy per year, the share of stable pixels that keep their
class and the precision, recall and F1 of the change found.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np
import rasterio
from rasterio.windows import Window

from lcflow.common.atomic import publish_together, write_text
from lcflow.common.progress import Progress
from lcflow.common.raster import Bands, Grid, read_with_halo, staged_cog
from lcflow.defaults import default
from lcflow.errors import LcflowError
from lcflow.labels.nomenclature import Nomenclature
from lcflow.maps import change
from lcflow.maps.consistency_settings import ConsistencySettings
from lcflow.maps.hmm import CodedEvidence, smooth_coded
from lcflow.maps.map_windows import PROBABILITY_NODATA, PROBABILITY_SCALE, map_type
from lcflow.maps.series_tally import SeriesTally
from lcflow.train.model_dirs.model_dir import sha256

log = logging.getLogger("lcflow.maps.consistent")

#: the halo read around each window to see whole change patches; bigger minimum patches than this
#: are judged on what the halo shows (a patch is only ever seen too small, so kept changes are right)
MAX_HALO_PX = 256

METHOD = (
    "hidden Markov model over the years on the class probabilities (Viterbi path; confidence: "
    "forward-backward marginal); changes in patches below the minimum size refused"
)


def _classes_of(paths: list[Path]) -> dict:
    """Classes, names, colours and model of the probability rasters, which must agree, on one grid."""
    first = None
    for path in paths:
        if not path.exists():
            raise LcflowError(
                f"probabilities {path} do not exist (lcflow predict --probabilities writes them)"
            )
        with rasterio.open(path) as ds:
            tags = ds.tags()
            try:
                info = {
                    "classes": json.loads(tags["class_codes"]),
                    "class_names": json.loads(tags["class_names"]),
                    "class_colors": json.loads(tags.get("class_colors", "{}")),
                    "model": tags.get("model"),
                    "grid": Grid(ds.crs, ds.transform, ds.width, ds.height),
                }
            except (KeyError, json.JSONDecodeError) as exc:
                raise LcflowError(
                    f"{path} is not a probability raster written by lcflow predict ({exc!r})"
                ) from exc
            if ds.count != len(info["classes"]):
                raise LcflowError(f"{path} has {ds.count} bands for {len(info['classes'])} classes")
        if first is None:
            first = {**info, "path": path}
        elif info["classes"] != first["classes"]:
            raise LcflowError(
                f"{path} and {first['path']} are not of one model (classes {info['classes']} vs "
                f"{first['classes']}): predict every year with the same model"
            )
        elif info["grid"] != first["grid"]:
            raise LcflowError(
                f"{path} and {first['path']} are not on one grid ({info['grid'].describe()} vs "
                f"{first['grid'].describe()}): predict every year of a tile on its cubes' grid"
            )
    if first is None:
        raise LcflowError("no probability rasters given: one a year is needed")
    return first


def change_patch_px(min_change_ha: float, pixel_area_m2: float, years: int) -> tuple[int, int]:
    """The smallest change patch kept, in pixels of ``pixel_area_m2``, and the halo read around each
    window to judge it (none for a single year or a patch of one pixel)."""
    min_px = max(1, math.ceil(min_change_ha * 1e4 / pixel_area_m2 - 1e-9))
    return min_px, (min(min_px, MAX_HALO_PX) if min_px > 1 and years > 1 else 0)


#: the probability each stored uint8 level stands for (as lcflow predict --probabilities stores them)
LEVELS = np.arange(256, dtype=np.float32) / PROBABILITY_SCALE


def _read(
    ds: rasterio.io.DatasetReader, window: Window, halo: int
) -> tuple[np.ndarray, np.ndarray]:
    """(pixels, classes) stored probability levels (``LEVELS``), row-major (a pixel's classes side by side,
    as the model's recursions read them), and the no-data mask of a window with ``halo`` px around it."""
    raw = read_with_halo(ds, window, halo, PROBABILITY_NODATA)
    empty = raw[0] == PROBABILITY_NODATA
    return np.ascontiguousarray(raw.reshape(raw.shape[0], -1).T), empty.ravel()


@numba.njit(cache=True, nogil=True)
def first_max(levels: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``levels.argmax(axis=2)`` of (years, pixels, classes): the first class of the highest level."""
    t_n, p_n, k = levels.shape
    out = np.empty((t_n, p_n), dtype=np.int64)
    for t in range(t_n):
        for p in range(p_n):
            best, top = 0, levels[t, p, 0]
            # a running best taken by selects, not branches: the data decides them
            for j in range(1, k):
                higher = levels[t, p, j] > top
                best = j if higher else best
                top = levels[t, p, j] if higher else top
            out[t, p] = best
    return out


def _crop(a: np.ndarray, shape: tuple[int, int], halo: int) -> np.ndarray:
    """The inner window of (..., pixels of the halo-widened window), flattened back."""
    rows, cols = shape
    full = a.reshape(*a.shape[:-1], rows + 2 * halo, cols + 2 * halo)
    return full[..., halo : halo + rows, halo : halo + cols].reshape(*a.shape[:-1], rows * cols)


@dataclass(frozen=True)
class SeriesOutputs:
    """The files a consistent series writes: per year its class map and confidence map (COGs), per pair of
    consecutive years its change map (COG), and the summary (JSON)."""

    maps: list[Path]
    confidences: list[Path]
    changes: list[Path]
    summary: Path

    @classmethod
    def of(
        cls,
        maps: list[str | Path],
        confidences: list[str | Path],
        changes: list[str | Path],
        summary: str | Path,
    ) -> SeriesOutputs:
        return cls(
            [Path(m) for m in maps],
            [Path(c) for c in confidences],
            [Path(c) for c in changes],
            Path(summary),
        )


def run(
    probabilities: list[str | Path],
    years: list[int],
    out: SeriesOutputs,
    settings: ConsistencySettings | None = None,
    *,
    block: int = default("predict.block_px"),
    truths: list[str | Path] | None = None,
    nomenclature: Nomenclature | None = None,
) -> dict:
    """Write the consistent maps, their confidence, the change maps and the summary JSON (see module).

    Args:
        probabilities: each year's stored class probabilities of one tile and model.
        years: their years, in the same order.
        out: the files to write.
        settings: how sure and how large a change must be (the config's ``consistency``); None: the
            schema's defaults.
        block: the window, pixels a side (``predict.block_px``).
        truths: each year's true classes (the demo's), to score the maps; None: none.
        nomenclature: the classes of the truths (their codes mapped to the map's).
    """
    settings = settings or ConsistencySettings()
    paths = [Path(p) for p in probabilities]
    n = len(years)
    _check_series(paths, years, out, truths, nomenclature)
    info = _classes_of(paths)
    grid, classes = info["grid"], info["classes"]
    for t in truths or []:
        if Grid.of(t) != grid:
            raise LcflowError(f"truth raster {t} is not on the grid of {paths[0]}")
    pixel_area_m2 = grid.resolution * abs(grid.transform.e)
    min_px, halo = _change_patch(settings, pixel_area_m2, n)
    codes = np.asarray(classes)
    dtype, nodata = map_type(classes)
    table, tags = _legend(info, years, settings, min_px)
    tallies = SeriesTally.of(n, len(classes))
    windows = list(grid.windows(block))
    progress = Progress(log, f"consistent maps of {len(years)} years", grid.width * grid.height)
    with contextlib.ExitStack() as stack:
        out_maps, out_conf, out_change = _staged_outputs(stack, grid, out, years, info, tags, table)
        sources = [stack.enter_context(rasterio.open(p)) for p in paths]
        truth_sources = [stack.enter_context(rasterio.open(t)) for t in truths or []]
        for win in windows:
            shape = (int(win.height), int(win.width))
            path, confidence, empty, raw = _smoothed(
                sources, win, halo, years, (settings.evidence_ratio, min_px)
            )
            valid = ~empty
            # each pair's pixels of data in both years
            both = [valid[t] & valid[t + 1] for t in range(n - 1)]
            _write_window(
                (out_maps, out_conf, out_change),
                win,
                (path, confidence, empty, both),
                codes,
                (dtype, nodata),
            )
            tallies.add(raw, path, both)
            if truth_sources and nomenclature is not None:
                truth = np.stack(
                    [nomenclature.apply(src.read(1, window=win)).ravel() for src in truth_sources]
                )
                tallies.add_truth(truth, (truth != nomenclature.nodata) & valid, codes, raw, path)
            progress.add(1, len(windows), shape[0] * shape[1])
        staged = [pair for s in out_conf + out_change + out_maps for pair in s.finished()]
        publish_together(staged)
    result = {
        "model": info["model"],
        "years": list(years),
        "method": METHOD,
        "evidence_ratio": settings.evidence_ratio,
        "min_change_ha": settings.min_change_ha,
        "min_change_px": min_px,
        "classes": classes,
        "class_names": info["class_names"],
        "change_classes": table,
        "pairs": tallies.pairs(years, out.changes, pixel_area_m2, bool(truths)),
    }
    # each year's share of the pixels of known truth the raw and the consistent maps got right
    if truths:
        result["truth_overall_accuracy"] = tallies.score.shares()
    write_text(out.summary, json.dumps(result, indent=1))
    _log_pairs(result["pairs"])
    return result


def _change_patch(
    settings: ConsistencySettings, pixel_area_m2: float, years: int
) -> tuple[int, int]:
    """The smallest change patch (px) and the halo a window is judged on (:func:`change_patch_px`)."""
    min_px, halo = change_patch_px(settings.min_change_ha, pixel_area_m2, years)
    if min_px > MAX_HALO_PX:
        log.warning(
            "a minimum change patch of %d px is judged on a halo of %d px around each window",
            min_px,
            MAX_HALO_PX,
        )
    return min_px, halo


def _legend(
    info: dict, years: list[int], settings: ConsistencySettings, min_px: int
) -> tuple[list, dict]:
    """The change maps' classes (each from-to pair's code, name and colour), and the maps' tags: the model,
    its classes and how the series was made consistent."""
    classes = info["classes"]
    table = change.change_table(
        classes,
        {int(c): v for c, v in info["class_names"].items()},
        {int(c): tuple(v) for c, v in info["class_colors"].items()},
    )
    tags = {
        "model": info["model"],
        "class_names": info["class_names"],
        "class_codes": classes,
        "consistency": {
            "method": METHOD,
            "years": list(years),
            "evidence_ratio": settings.evidence_ratio,
            "min_change_px": min_px,
        },
    }
    return table, tags


def _smoothed(
    sources: list, win: Window, halo: int, years: list[int], rule: tuple[float, int]
) -> tuple[np.ndarray, ...]:
    """A window's consistent classes (indices), their confidence, where there is no data, and the raw
    classes (each year's most likely), each (years, pixels); read and smoothed with a halo of ``halo`` px
    around it. ``rule``: the evidence ratio a change needs, and the smallest change patch (px)."""
    shape = (int(win.height), int(win.width))
    wide = (shape[0] + 2 * halo, shape[1] + 2 * halo)
    read = [_read(src, win, halo) for src in sources]
    levels, empty = np.stack([r[0] for r in read]), np.stack([r[1] for r in read])
    path, confidence = smooth_coded(
        CodedEvidence(levels, LEVELS, empty), years, rule[0], rule[1], wide
    )
    raw = first_max(levels)  # the levels rise with the probabilities
    return tuple(_crop(a, shape, halo) for a in (path, confidence, empty, raw))


def _write_window(
    files: tuple[list, list, list],
    win: Window,
    series: tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]],
    codes: np.ndarray,
    pixels: tuple[str, int],
) -> None:
    """A window of each year's map and confidence, and of each pair's change map; ``series``: the consistent
    classes (indices), their confidence, where there is no data, and where each pair has data in both years;
    ``pixels``: the maps' type and no-data."""
    out_maps, out_conf, out_change = files
    path, confidence, empty, both = series
    (dtype, nodata), shape, k = pixels, (int(win.height), int(win.width)), len(codes)
    for t in range(len(out_maps)):
        out_maps[t].dataset.write(
            np.where(empty[t], nodata, codes[path[t]]).astype(dtype).reshape(shape), 1, window=win
        )
        conf = np.where(empty[t], 255, np.round(confidence[t] * 100)).astype(np.uint8)
        out_conf[t].dataset.write(conf.reshape(shape), 1, window=win)
    for t in range(len(out_change)):
        out_change[t].dataset.write(
            change.change_map(path[t], path[t + 1], both[t], k).reshape(shape), 1, window=win
        )


def _staged_outputs(
    stack: contextlib.ExitStack,
    grid: Grid,
    out: SeriesOutputs,
    years: list[int],
    info: dict,
    tags: dict,
    table: list,
) -> tuple[list, list, list]:
    """The staging COGs of the series: each year's map (with its legend) and confidence, each pair's change map."""
    dtype, nodata = map_type(info["classes"])
    colors = {int(c): tuple(v) for c, v in info["class_colors"].items()}
    names = {int(c): v for c, v in info["class_names"].items()}
    out_maps = [
        stack.enter_context(
            staged_cog(
                m,
                grid,
                Bands(1, dtype, nodata, ["class"]),
                colors=colors,
                names=names,
                tags={**tags, "year": y},
                resampling="mode",
            )
        )
        for m, y in zip(out.maps, years)
    ]
    out_conf = [
        stack.enter_context(
            staged_cog(
                c,
                grid,
                Bands(1, "uint8", 255, ["confidence"]),
                tags={"unit": "percent", "model": info["model"], "year": y},
                resampling="average",
            )
        )
        for c, y in zip(out.confidences, years)
    ]
    out_change = [
        stack.enter_context(
            staged_cog(
                c,
                grid,
                Bands(1, "uint16", change.CHANGE_NODATA, ["from-to"]),
                colors={r["code"]: tuple(r["color"]) for r in table},
                tags={**tags, "years": [years[i], years[i + 1]], "change_classes": table},
                resampling="mode",
            )
        )
        for i, c in enumerate(out.changes)
    ]
    return out_maps, out_conf, out_change


def _check_series(
    probabilities: list[Path],
    years: list[int],
    out: SeriesOutputs,
    truths: list | None,
    nomenclature: Nomenclature | None,
) -> None:
    """One probability raster (each its own), map and confidence map a year, a change map a pair, years in
    order."""
    n, n_probabilities = len(years), len(probabilities)
    n_maps, n_confidences, n_changes = len(out.maps), len(out.confidences), len(out.changes)
    if not (n_probabilities == n_maps == n_confidences == n) or n_changes != max(n - 1, 0):
        raise LcflowError(
            f"{n} years need as many probability rasters, maps and confidence maps "
            f"and {max(n - 1, 0)} change maps (got {n_probabilities}, {n_maps}, "
            f"{n_confidences}, {n_changes})"
        )
    if list(years) != sorted(set(years)):
        raise LcflowError(f"years {years} must be given in increasing order, each once")
    if truths is not None and (len(truths) != n or nomenclature is None):
        raise LcflowError("truth rasters need one per year and the nomenclature of the labels")
    for i, p in enumerate(probabilities):
        earlier = next((j for j in range(i) if _same_file(probabilities[j], p)), None)
        if earlier is not None:
            raise LcflowError(
                f"probability raster {p} ({years[i]}) is {probabilities[earlier]} ({years[earlier]}) or a "
                "copy of it: each year needs its own (lcflow predict --probabilities of that year's cube)"
            )


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file or byte-for-byte copies (hashed only where their sizes agree:
    two maps of different years almost never do)."""
    if a.resolve() == b.resolve():
        return True
    if not (a.is_file() and b.is_file()) or a.stat().st_size != b.stat().st_size:
        return False
    return sha256(a) == sha256(b)


def _log_pairs(pairs: list[dict]) -> None:
    for p in pairs:
        r, c = p["raw"], p["consistent"]
        if not c["pixels"]:
            log.warning("%d-%d: no pixel has data in both years", *p["years"])
            continue
        log.info(
            "%d-%d: changed %.2f%% of the pixels (raw maps %.2f%%)%s",
            *p["years"],
            100 * c["changed_fraction"],
            100 * r["changed_fraction"],
            (
                f"; against truth: stable kept {c['truth']['stable_kept']:.3f} (raw {r['truth']['stable_kept']:.3f}),"
                f" change F1 {c['truth']['change_f1']:.3f} (raw {r['truth']['change_f1']:.3f})"
            )
            if "truth" in c
            else "",
        )
