"""Draw training samples from a tile-year: stratified by class, away from label boundaries, split by block.

Pixels within ``boundary_px`` of another label or of an unlabelled pixel are skipped (CORINE is wrong
there most often, and a polygon's edge pixels are mixed); labels given as points are samples as they are;
train/val/test are assigned per square block of ``block_px`` pixels, so neighbouring pixels never
sit on both sides of an evaluation (spatial autocorrelation would inflate the scores). With
``patch_px`` the table also carries the cube around each sample (the patch variant of the contract,
for models that look at neighbours).
"""

import json
import logging
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import rasterio
from rasterio.windows import Window
from scipy import ndimage

from lcflow.common import evidence
from lcflow.common.raster import Grid, read_tag, read_with_halo
from lcflow.errors import LcflowError
from lcflow.labels import cleaning as label_noise
from lcflow.labels import samples_table
from lcflow.labels import transfer as label_transfer
from lcflow.labels.cleaning import Cleaning
from lcflow.labels.sample_settings import SampleSettings
from lcflow.labels.transfer import ChangeTest
from lcflow.retrieve.composite import NODATA

log = logging.getLogger(__name__)

#: candidates drawn per sample wanted when labels are checked: the checks drop some 10-25 % on CORINE
CANDIDATES_PER_SAMPLE = 1.5


def eligible(labels: np.ndarray, nodata: int, boundary_px: int) -> np.ndarray:
    """Labelled pixels with the same label everywhere within ``boundary_px``."""
    ok = labels != nodata
    if boundary_px > 0:
        size = 2 * boundary_px + 1
        ok &= ndimage.maximum_filter(labels, size=size, mode="nearest") == ndimage.minimum_filter(
            labels, size=size, mode="nearest"
        )
    return ok


def block_splits(
    shape: tuple[int, int], block_px: int, fractions: dict[str, float], seed: int
) -> np.ndarray:
    """Split name per pixel, constant over square blocks, drawn with the given fractions.

    The splits are drawn in the order train, val, test whatever the order of ``fractions``: the same
    configuration written with its keys in another order gives the same samples.
    """
    nby, nbx = -(-shape[0] // block_px), -(-shape[1] // block_px)
    rng = np.random.default_rng(seed)
    names = [n for n in ("train", "val", "test") if n in fractions]
    p = np.array([fractions[n] for n in names], dtype=float)
    per_block = rng.choice(len(names), size=(nby, nbx), p=p / p.sum())
    full = np.repeat(np.repeat(per_block, block_px, axis=0), block_px, axis=1)[
        : shape[0], : shape[1]
    ]
    return np.array(names)[full]


def run(
    cube: str | Path,
    valid: str | Path,
    labels: str | Path,
    out: str | Path,
    settings: SampleSettings | None = None,
    *,
    tile: str,
    year: int,
    reference_cube: str | Path | None = None,
) -> pd.DataFrame:
    """Write the samples table of one tile-year and return it.

    With ``settings.clean`` the train and val rows whose series contradicts their label are dropped
    (:mod:`lcflow.labels.cleaning`); with ``reference_cube`` those whose series changed since then
    (:mod:`lcflow.labels.transfer`). Test rows are kept as drawn, so no classifier chooses what the models
    are scored on. More candidates than ``per_class`` are drawn so that the checks still leave
    ``per_class`` where the class allows.

    Args:
        cube: the tile-year's cube.
        valid: its clear-observation counts.
        labels: the tile's class raster (``lcflow labels``).
        out: the samples table to write (Parquet, its metadata under ``lcflow``).
        settings: the ``sample`` section (draw, split, label checks); None: the defaults.
        tile: the MGRS tile, a column of the table and part of the draw's seed.
        year: the cube's year, a column and part of the seed.
        reference_cube: the cube of the year the labels show, where ``year`` is another; None: none.
    """
    settings = settings or SampleSettings()
    per_class, min_valid_fraction, block_px = (
        settings.per_class,
        settings.min_valid_fraction,
        settings.block_px,
    )
    patch_px = settings.patch_px
    fractions = _checked_fractions(dict(settings.fractions), patch_px)
    cleaning = Cleaning(settings.clean, settings.seed)
    change_test = ChangeTest(settings.transfer.mad_k)
    grid = _common_grid(cube, valid, labels, reference_cube, f"tile {tile} {year}")
    with rasterio.open(labels) as ds:
        lab = ds.read(1)
        nodata = int(ds.nodata)
    boundary_px, cleaning = _for_source(
        read_tag(labels, "label_source") or {}, settings.boundary_px, cleaning, tile, year
    )
    with rasterio.open(valid) as ds:
        valid_fraction = (ds.read() > 0).mean(axis=0)
    ok = eligible(lab, nodata, boundary_px) & (valid_fraction >= min_valid_fraction)
    rng = np.random.default_rng(zlib.crc32(f"{settings.seed}/{tile}/{year}".encode()))
    checking = cleaning.enabled or (reference_cube is not None and change_test.enabled)
    draw = int(np.ceil(per_class * (CANDIDATES_PER_SAMPLE if checking else 1)))
    picked = [
        rng.choice(idx, size=min(draw, idx.size), replace=False)
        for idx in (np.flatnonzero(ok.ravel() & (lab.ravel() == c)) for c in np.unique(lab[ok]))
    ]
    if not picked:
        raise LcflowError(
            f"tile {tile} {year}: no pixel qualifies for sampling (labels, valid fraction >= {min_valid_fraction})"
        )
    rows, cols = np.unravel_index(np.sort(np.concatenate(picked)), lab.shape)
    names, values, patches = _read_at(cube, grid, rows, cols, patch_px)
    xs, ys = rasterio.transform.xy(grid.transform, rows, cols)
    split = block_splits(
        lab.shape, block_px, fractions, zlib.crc32(f"{settings.seed}/{tile}".encode())
    )[rows, cols]
    frame = pd.DataFrame(
        {
            "label": lab[rows, cols].astype(np.int32),
            "split": split,
            "tile": tile,
            "year": np.int32(year),
            "row": rows.astype(np.int32),
            "col": cols.astype(np.int32),
            "x": np.asarray(xs),
            "y": np.asarray(ys),
        }
    )
    frame = pd.concat([frame, pd.DataFrame(values, columns=names)], axis=1)
    where = f"tile {tile} {year}"
    keep, checks = _check_labels(
        frame, names, reference_cube, grid, block_px, cleaning, change_test, where
    )
    keep &= _cap(frame["label"].to_numpy(), keep, per_class, rng)
    frame = frame[keep].reset_index(drop=True)
    patches = patches[keep] if patches is not None else None
    _log_kept(frame["label"].value_counts(), len(keep), checks, where, settings.min_per_class)
    _warn_thin_test(frame, where, fractions)
    samples_table.write(
        frame, out, _metadata(cube, labels, grid, checks, patch_px, names), patches=patches
    )
    return frame


def _warn_thin_test(frame: pd.DataFrame, where: str, fractions: dict[str, float]) -> None:
    """A test split that cannot back an agreement figure on its own (too few rows, or one class): said at
    sampling, where a larger area or larger blocks mend it, not when the figure is missing."""
    if "test" not in fractions:
        return
    short = evidence.shortfall(frame.loc[frame["split"] == "test", "label"].to_numpy(), "test rows")
    if short:
        log.warning(
            "%s: the test split holds %s: its agreement figure will be withheld; a larger area (aoi) "
            "or smaller split blocks (sample.block_px) give it more",
            where,
            short,
        )


def _metadata(cube, labels, grid: Grid, checks: dict, patch_px: int, names: list[str]) -> dict:
    """The table's metadata: the cube's steps and bands, the labels' classes, the grid's CRS, what the
    label checks did, and the patches' layout (``patch_px`` square, of the bands ``names``) where there are."""
    meta = {
        "time_steps": read_tag(cube, "time_steps"),
        "bands": read_tag(cube, "bands"),
        "class_names": read_tag(labels, "class_names"),
        "class_colors": read_tag(labels, "class_colors"),
        "crs": grid.crs.to_string(),
        "scale": 10000,
        "label_checks": checks,
    }
    if patch_px:
        meta["patch"] = {"size": patch_px, "bands": names, "nodata": NODATA}
    return meta


def _checked_fractions(fractions: dict[str, float], patch_px: int) -> dict[str, float]:
    """The split's shares (train, val, test; ``sample.fractions``), summing to 1; a patch size odd or 0."""
    unknown = sorted(set(fractions) - {"train", "val", "test"})
    if (
        unknown
        or any(not isinstance(v, (int, float)) or v < 0 for v in fractions.values())
        or not fractions.get("train")
    ):
        raise LcflowError(
            f"sample fractions {fractions}: give train (> 0), val and test shares (>= 0)"
            + (f"; unknown split(s) {unknown}" if unknown else "")
        )
    if abs(sum(fractions.values()) - 1) > 1e-6:
        raise LcflowError(f"sample fractions {fractions} sum to {sum(fractions.values()):g}, not 1")
    if patch_px < 0 or (patch_px and patch_px % 2 == 0):
        raise LcflowError(
            f"sample patch_px {patch_px}: must be 0 (no patches) or odd, so a patch has a centre"
        )
    return fractions


def _common_grid(cube, valid, labels, reference_cube, where: str) -> Grid:
    """The grid the cube, its valid counts, the labels (and the reference cube, of the same bands) share."""
    grid = Grid.of(cube)
    if Grid.of(labels) != grid or Grid.of(valid) != grid:
        raise LcflowError(f"{labels}, {valid} and {cube} are not on the same grid")
    if reference_cube is not None:
        if Grid.of(reference_cube) != grid:
            raise LcflowError(f"reference cube {reference_cube} is not on the grid of {cube}")
        with rasterio.open(cube) as a, rasterio.open(reference_cube) as b:
            if a.descriptions != b.descriptions:
                raise LcflowError(
                    f"reference cube {reference_cube} has other bands or steps than the cube of {where} "
                    f"({cube})"
                )
    return grid


def _for_source(
    source: dict, boundary_px: int, cleaning: Cleaning, tile: str, year: int
) -> tuple[int, Cleaning]:
    """Points are samples as they are (no boundary erosion); your own reference data are not cleaned unless
    asked (sample.clean.reference_data)."""
    if source.get("geometry") == "points" and boundary_px:
        log.info(
            "tile %s %d: labels are points, each its own sample: no boundary erosion", tile, year
        )
        boundary_px = 0
    if (
        source.get("kind") == "reference"
        and cleaning.enabled
        and not cleaning.settings.reference_data
    ):
        log.info(
            "tile %s %d: labels are your own reference data: no label-noise cleaning (sample.clean.reference_data)",
            tile,
            year,
        )
        cleaning = cleaning.off()
    return boundary_px, cleaning


def _log_kept(
    counts: pd.Series, candidates: int, checks: dict, where: str, min_per_class: int
) -> None:
    """What the label checks kept, per class (recorded in ``checks``), and a warning for a class under the minimum."""
    for c, n in sorted(counts.items()):
        checks["per_class"].setdefault(str(c), {})["kept"] = int(n)
    if checks["applied"]:
        log.info(
            "%s: label checks kept %d of %d candidates; per class %s",
            where,
            int(counts.sum()),
            candidates,
            json.dumps(checks["per_class"]),
        )
    for c, n in sorted(counts.items()):
        if n < min_per_class:
            log.warning(
                "%s: class %d has %d samples, under the minimum of %d; kept (the models see few of it)",
                where,
                c,
                n,
                min_per_class,
            )


def _read_at(
    cube: str | Path, grid: Grid, rows: np.ndarray, cols: np.ndarray, patch_px: int
) -> tuple[list[str], np.ndarray, np.ndarray | None]:
    """Band names, values (samples, bands; NaN for nodata) and optional patches at the given pixels, read
    window by window."""
    half = patch_px // 2
    with rasterio.open(cube) as ds:
        names = list(ds.descriptions)
        values = np.empty((rows.size, ds.count), dtype=np.float32)
        patches = (
            np.empty((rows.size, ds.count, patch_px, patch_px), dtype=np.int16)
            if patch_px
            else None
        )
        for win in grid.windows(1024):
            inside = (
                (rows >= win.row_off)
                & (rows < win.row_off + win.height)
                & (cols >= win.col_off)
                & (cols < win.col_off + win.width)
            )
            if inside.any():
                r, c = rows[inside] - int(win.row_off), cols[inside] - int(win.col_off)
                block = ds.read(window=win)
                values[inside] = block[:, r, c].T
                if patches is not None:
                    patches[inside] = _patches(ds, win, half, r, c)
    values[values == NODATA] = np.nan
    return names, values, patches


def _series(values: np.ndarray, names: list[str], where: str) -> np.ndarray:
    """(samples, bands x steps) columns named BAND_tKK -> (samples, steps, bands), as a samples table
    lays them out."""
    bands, steps = samples_table.band_layout(names, where)
    return samples_table.SampleTable(pd.DataFrame(values, columns=names), bands, steps).features()


def _check_labels(
    frame: pd.DataFrame,
    names: list[str],
    reference_cube,
    grid: Grid,
    block_px: int,
    cleaning: Cleaning,
    change_test: ChangeTest,
    where: str,
) -> tuple[np.ndarray, dict]:
    """Rows to keep after the change test (against the reference year) and the noise filter, on the
    train and val rows (their series the frame's columns ``names``); and what each check dropped per class."""
    labels = frame["label"].to_numpy()
    judged = frame["split"].isin(["train", "val"]).to_numpy()
    keep = np.ones(len(frame), dtype=bool)
    per_class = {str(c): {"candidates": int((labels == c).sum())} for c in np.unique(labels)}
    applied: list[dict] = []
    checks = {"applied": applied, "judged_splits": ["train", "val"], "per_class": per_class}
    series = _series(frame[names].to_numpy(), names, where)
    if reference_cube is not None and change_test.enabled:
        ref_names, ref_values, _ = _read_at(
            reference_cube, grid, frame["row"].to_numpy(), frame["col"].to_numpy(), 0
        )
        distance = label_transfer.series_distance(
            series, _series(ref_values, ref_names, str(reference_cube))
        )
        moved = label_transfer.changed(distance, labels, change_test) & judged
        keep &= ~moved
        applied.append(
            {
                "check": "change since the reference year",
                "reference_cube": str(reference_cube),
                "mad_k": change_test.mad_k,
            }
        )
        for c in per_class:
            per_class[c]["changed"] = int(moved[labels == int(c)].sum())
    if cleaning.enabled:
        rows = np.flatnonzero(judged & keep)
        x = label_noise.forest_rows(series[rows])
        groups = (frame["row"].to_numpy()[rows] // block_px) * 1_000_003 + frame["col"].to_numpy()[
            rows
        ] // block_px
        drop = label_noise.noisy(x, labels[rows], groups, cleaning, where)
        keep[rows[drop]] = False
        applied.append({"check": "out-of-fold label probability", **cleaning.record()})
        for c in per_class:
            per_class[c]["noisy"] = int(drop[labels[rows] == int(c)].sum())
    return keep, checks


def _cap(
    labels: np.ndarray, keep: np.ndarray, per_class: int, rng: np.random.Generator
) -> np.ndarray:
    """At most ``per_class`` of the kept rows of each class, chosen at random."""
    out = np.zeros(len(labels), dtype=bool)
    for c in np.unique(labels[keep]):
        idx = np.flatnonzero(keep & (labels == c))
        out[rng.choice(idx, size=min(per_class, idx.size), replace=False)] = True
    return out


def _patches(ds, win: Window, half: int, r: np.ndarray, c: np.ndarray) -> np.ndarray:
    """(samples, bands, 2*half+1, 2*half+1) around window pixels (r, c); nodata beyond the raster."""
    block = read_with_halo(ds, win, half, NODATA)
    size = 2 * half + 1
    # (bands, rows, cols, p, p)
    views = np.lib.stride_tricks.sliding_window_view(block, (size, size), axis=(1, 2))
    return np.moveaxis(views[:, r, c], 0, 1)
