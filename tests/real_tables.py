"""Samples tables of real and realistic cases, for the tests and the model benchmark (not part of lcflow).

- ``slovenia``: every labelled pixel of the eo-learn Slovenia patch (tests/data/eolearn_slovenia): 68
  irregular Sentinel-2 NDVI dates, cloudy observations as NaN, real land-use classes, x/y/row/col.
- ``field_like``: a few hundred rows drawn from a demo samples table the way field samples come: classes
  as imbalanced as 305 / 97 / 28 / 23 / 12, about 7 % of the cells missing, no val rows.
- ``slovenia_grid``, ``slovenia_cube``: that patch's 10 m grid, and its NDVI series written as an lcflow
  cube (with its valid counts), for running ``lcflow labels`` and ``lcflow sample`` on real data.
- ``spatial_folds``: k spatially blocked folds (whole blocks to one fold, classes stratified), as
  ``split`` = train / test tables: the real case of a table without val rows.
"""

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pandas as pd

DATA = Path(__file__).parent / "data"
SLOVENIA = DATA / "eolearn_slovenia"
SLOVENIA_CLASSES = {1: "cultivated land", 2: "forest", 3: "grassland", 4: "shrubland", 8: "artificial surface"}
FIELD_SHARES = np.array([305, 97, 28, 23, 12]) / 465


def _origin() -> tuple[float, float]:
    """West and north edges of the patch (its rows run north to south)."""
    ring = json.loads((SLOVENIA / "bbox.geojson").read_text())["coordinates"][0]
    return min(p[0] for p in ring), max(p[1] for p in ring)


def _ndvi_and_cloud() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """NDVI (dates, rows, cols), the mask of cloudy or missing observations, and the acquisition times."""
    ndvi = np.load(SLOVENIA / "NDVI.npy")[..., 0]
    cloud = np.load(SLOVENIA / "CLM.npy")[..., 0].astype(bool) | ~np.load(SLOVENIA / "IS_DATA.npy")[..., 0].astype(bool)
    return ndvi, cloud, json.loads((SLOVENIA / "timestamps.json").read_text())


def slovenia_grid():
    """The patch's grid: 101 x 100 px of 10 m in EPSG:32633."""
    from affine import Affine
    from rasterio.crs import CRS

    from lcflow.common.raster import Grid

    x0, y1 = _origin()
    return Grid(crs=CRS.from_epsg(32633), transform=Affine(10, 0, x0, 0, -10, y1), width=100, height=101)


def slovenia_cube(directory: Path) -> tuple[Path, Path]:
    """The NDVI series as a cube of the samples contract (``NDVI_tKK``, x 10000, nodata under clouds) and its
    valid counts, written in ``directory``; their paths."""
    from lcflow.common.raster import write_cog
    from lcflow.retrieve.composite import NODATA

    ndvi, cloud, times = _ndvi_and_cloud()
    grid = slovenia_grid()
    write_cog(directory / "cube.tif", np.where(cloud, NODATA, np.round(ndvi * 10000)).astype(np.int16), grid,
              nodata=NODATA, descriptions=[f"NDVI_t{k:02d}" for k in range(len(times))],
              tags={"time_steps": [t[:10] for t in times], "bands": ["NDVI"]})
    write_cog(directory / "valid.tif", (~cloud).astype(np.uint8), grid, nodata=None)
    return directory / "cube.tif", directory / "valid.tif"


def slovenia() -> tuple[pd.DataFrame, dict]:
    """One row per labelled pixel; ``NDVI_t00`` .. ``NDVI_t67``, NaN under clouds; and the metadata."""
    ndvi, cloud, times = _ndvi_and_cloud()
    lulc = np.load(SLOVENIA / "LULC.npy")[..., 0]
    x0, y1 = _origin()
    values = np.where(cloud, np.nan, ndvi).astype(np.float32)  # (dates, rows, cols)
    rows, cols = np.nonzero(lulc)
    frame = pd.DataFrame({"label": lulc[rows, cols].astype(np.int32), "row": rows.astype(np.int32),
                          "col": cols.astype(np.int32), "x": x0 + 10 * cols + 5.0, "y": y1 - 10 * rows - 5.0})
    bands = pd.DataFrame(values[:, rows, cols].T, columns=[f"NDVI_t{k:02d}" for k in range(len(times))])
    meta = {"time_steps": [dt.datetime.fromisoformat(t).date().isoformat() for t in times],
            "class_names": {str(k): v for k, v in SLOVENIA_CLASSES.items()}, "crs": "EPSG:32633"}
    return pd.concat([frame, bands], axis=1), meta


def field_like(frame: pd.DataFrame, n: int, seed: int, missing: float = 0.07, missing_steps: float = 0.0
               ) -> pd.DataFrame:
    """``n`` rows with the class imbalance of a real field campaign, ``missing`` of the cells NaN, and
    ``missing_steps`` of each row's time steps missing whole (every band), as a cloudy month is in a
    monthly composite (0.075 of 12 months: 61 % of the rows miss at least one month).

    The commonest classes of ``frame`` take the shares 305/97/28/23/12 (of 465) in their order of
    frequency; classes as common as each other are ordered at random.
    """
    rng = np.random.default_rng(seed)
    counts = frame["label"].value_counts()
    order = sorted(counts.index, key=lambda c: (-counts[c], rng.random()))
    classes = np.array(order[:len(FIELD_SHARES)])
    sizes = np.maximum(np.round(FIELD_SHARES[:len(classes)] * n).astype(int), 5)
    parts = [frame[frame["label"] == c].sample(n=min(s, int((frame["label"] == c).sum())), random_state=seed)
             for c, s in zip(classes, sizes)]
    out = pd.concat(parts, ignore_index=True).drop(columns=["split"], errors="ignore").copy()
    bands = [c for c in out.columns if "_t" in c]
    cells = out[bands].to_numpy(dtype=np.float64, copy=True)
    cells[rng.random(cells.shape) < missing] = np.nan
    if missing_steps:
        steps = np.array([c.rsplit("_t", 1)[1] for c in bands])
        names = np.unique(steps)
        gone = rng.random((len(out), len(names))) < missing_steps  # (rows, steps)
        cells[gone[:, np.searchsorted(names, steps)]] = np.nan
    out[bands] = cells
    return out


def spatial_folds(frame: pd.DataFrame, k: int, block_m: float, seed: int = 0):
    """Yield k train/test tables; blocks of ``block_m`` metres (x/y) go whole to one fold."""
    from sklearn.model_selection import StratifiedGroupKFold

    keys = [frame[c] for c in ("tile", "year") if c in frame.columns]
    keys += [np.floor(frame["x"] / block_m).astype(int), np.floor(frame["y"] / block_m).astype(int)]
    groups = pd.MultiIndex.from_arrays(keys).factorize()[0]
    folds = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
    for _, test in folds.split(frame, frame["label"], groups):
        split = np.full(len(frame), "train", dtype=object)
        split[test] = "test"
        yield frame.copy().assign(split=split)
