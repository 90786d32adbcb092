"""Draw training samples from a tile-year: stratified by class, away from label boundaries, split by block.

Pixels within ``boundary_px`` of another label are skipped (CORINE is wrong there most often);
train/val/test are assigned per square block of ``block_px`` pixels, so neighbouring pixels never
sit on both sides of an evaluation (spatial autocorrelation would inflate the scores). With
``patch_px`` the table also carries the cube around each sample (the patch variant of the contract,
for models that look at neighbours).
"""

import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import rasterio
from rasterio.windows import Window
from scipy import ndimage

from . import samples as samples_table
from .cube import NODATA
from .errors import LcflowError
from .raster import Grid, read_tag


def eligible(labels: np.ndarray, nodata: int, boundary_px: int) -> np.ndarray:
    """Labelled pixels with the same label everywhere within ``boundary_px``."""
    ok = labels != nodata
    if boundary_px > 0:
        size = 2 * boundary_px + 1
        ok &= ndimage.maximum_filter(labels, size=size, mode="nearest") == ndimage.minimum_filter(labels, size=size, mode="nearest")
    return ok


def block_splits(shape: tuple[int, int], block_px: int, fractions: dict[str, float], seed: int) -> np.ndarray:
    """Split name per pixel, constant over square blocks, drawn with the given fractions.

    The splits are drawn in the order train, val, test whatever the order of ``fractions``: the same
    configuration written with its keys in another order gives the same samples.
    """
    nby, nbx = -(-shape[0] // block_px), -(-shape[1] // block_px)
    rng = np.random.default_rng(seed)
    names = [n for n in ("train", "val", "test") if n in fractions]
    p = np.array([fractions[n] for n in names], dtype=float)
    per_block = rng.choice(len(names), size=(nby, nbx), p=p / p.sum())
    full = np.repeat(np.repeat(per_block, block_px, axis=0), block_px, axis=1)[: shape[0], : shape[1]]
    return np.array(names)[full]


def run(cube: str | Path, valid: str | Path, labels: str | Path, out: str | Path, *, tile: str, year: int,
        per_class: int = 500, min_valid_fraction: float = 0.5, boundary_px: int = 1, block_px: int = 32,
        fractions: dict[str, float] | None = None, seed: int = 0, patch_px: int = 0) -> pd.DataFrame:
    """Write the samples table of one tile-year and return it."""
    fractions = fractions or {"train": 0.6, "val": 0.2, "test": 0.2}
    unknown = sorted(set(fractions) - {"train", "val", "test"})
    if unknown or any(not isinstance(v, (int, float)) or v < 0 for v in fractions.values()) or not fractions.get("train"):
        raise LcflowError(f"sample fractions {fractions}: give train (> 0), val and test shares (>= 0)"
                          + (f"; unknown split(s) {unknown}" if unknown else ""))
    if abs(sum(fractions.values()) - 1) > 1e-6:
        raise LcflowError(f"sample fractions {fractions} sum to {sum(fractions.values()):g}, not 1")
    if patch_px < 0 or (patch_px and patch_px % 2 == 0):
        raise LcflowError(f"sample patch_px {patch_px}: must be 0 (no patches) or odd, so a patch has a centre")
    grid = Grid.of(cube)
    if Grid.of(labels) != grid or Grid.of(valid) != grid:
        raise LcflowError(f"{labels}, {valid} and {cube} are not on the same grid")
    with rasterio.open(labels) as ds:
        lab = ds.read(1)
        nodata = int(ds.nodata)
    with rasterio.open(valid) as ds:
        valid_fraction = (ds.read() > 0).mean(axis=0)
    ok = eligible(lab, nodata, boundary_px) & (valid_fraction >= min_valid_fraction)
    rng = np.random.default_rng(zlib.crc32(f"{seed}/{tile}/{year}".encode()))
    picked = []
    for c in np.unique(lab[ok]):
        idx = np.flatnonzero(ok.ravel() & (lab.ravel() == c))
        picked.append(rng.choice(idx, size=min(per_class, idx.size), replace=False))
    if not picked:
        raise LcflowError(f"tile {tile} {year}: no pixel qualifies for sampling (labels, valid fraction >= {min_valid_fraction})")
    flat = np.sort(np.concatenate(picked))
    rows, cols = np.unravel_index(flat, lab.shape)
    half = patch_px // 2
    with rasterio.open(cube) as ds:
        names = list(ds.descriptions)
        values = np.empty((flat.size, ds.count), dtype=np.float32)
        patches = np.empty((flat.size, ds.count, patch_px, patch_px), dtype=np.int16) if patch_px else None
        for win in grid.windows(1024):
            inside = (rows >= win.row_off) & (rows < win.row_off + win.height) & (cols >= win.col_off) & (cols < win.col_off + win.width)
            if inside.any():
                r, c = rows[inside] - int(win.row_off), cols[inside] - int(win.col_off)
                block = ds.read(window=win)
                values[inside] = block[:, r, c].T
                if patch_px:
                    patches[inside] = _patches(ds, win, half, r, c)
    values[values == NODATA] = np.nan
    xs, ys = rasterio.transform.xy(grid.transform, rows, cols)
    split = block_splits(lab.shape, block_px, fractions, zlib.crc32(f"{seed}/{tile}".encode()))[rows, cols]
    frame = pd.DataFrame({"label": lab[rows, cols].astype(np.int32), "split": split, "tile": tile,
                          "year": np.int32(year), "row": rows.astype(np.int32), "col": cols.astype(np.int32),
                          "x": np.asarray(xs), "y": np.asarray(ys)})
    frame = pd.concat([frame, pd.DataFrame(values, columns=names)], axis=1)
    meta = {"time_steps": read_tag(cube, "time_steps"), "bands": read_tag(cube, "bands"),
            "class_names": read_tag(labels, "class_names"), "class_colors": read_tag(labels, "class_colors"),
            "crs": grid.crs.to_string(), "scale": 10000}
    if patch_px:
        meta["patch"] = {"size": patch_px, "bands": names, "nodata": NODATA}
    samples_table.write(frame, out, meta, patches=patches)
    return frame


def _patches(ds, win: Window, half: int, r: np.ndarray, c: np.ndarray) -> np.ndarray:
    """(samples, bands, 2*half+1, 2*half+1) around window pixels (r, c); nodata beyond the raster."""
    halo = Window(win.col_off - half, win.row_off - half, win.width + 2 * half, win.height + 2 * half)
    block = ds.read(window=halo, boundless=True, fill_value=NODATA)
    size = 2 * half + 1
    views = np.lib.stride_tricks.sliding_window_view(block, (size, size), axis=(1, 2))  # (bands, rows, cols, p, p)
    return np.moveaxis(views[:, r, c], 0, 1)
