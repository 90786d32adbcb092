"""A stratified random sample of reference points drawn from a map, to be labelled independently.

Good practice for map accuracy and class areas (Olofsson et al. 2014) is a probability sample whose
reference labels come from better data than the map (photo-interpretation, field visits), not from the
training labels. The strata are the map's classes: the sample size follows Cochran's formula for a
target standard error of overall accuracy given guesses of each class's user's accuracy (Olofsson et al.
2014, eq. 13), and each class gets its share of it, at least ``min_per_class`` points so that rare
classes get usable user's accuracies. Every point carries its stratum and the stratum's pixel count, so
the labelled file alone is enough to compute the estimates (:func:`lcflow.common.metrics.stratified_estimates`).
"""

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import rasterio

from lcflow.common.raster import Grid, read_tag
from lcflow.defaults import default
from lcflow.errors import LcflowError

#: the column the interpreter fills with the reference class code
REFERENCE = "reference"


@dataclass(frozen=True)
class Design:
    """How many points: Cochran's size for ``target_se`` of overall accuracy, at least ``min_per_class``."""

    target_se: float = default("assess.design.target_se")
    min_per_class: int = default("assess.design.min_per_class")
    expected_users_accuracy: float = default("assess.design.users_accuracy")
    users_accuracy: dict[int, float] = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self):
        if not 0 < self.target_se < 0.5:
            raise LcflowError(
                f"design target standard error {self.target_se}: expected within 0..0.5"
            )
        for code, u in {"every class": self.expected_users_accuracy, **self.users_accuracy}.items():
            if not 0 < u <= 1:
                raise LcflowError(
                    f"design user's accuracy guess for {code} = {u}: expected within 0..1"
                )
        if self.min_per_class < 2:
            raise LcflowError(
                f"design min_per_class {self.min_per_class}: at least 2 (a stratum's variance needs 2)"
            )


def sample_size(weights: np.ndarray, users_accuracy: np.ndarray, target_se: float) -> int:
    """Cochran (1977) for stratified random sampling, as Olofsson et al. 2014 eq. 13: n = (sum W_i S_i / S(O))^2,
    S_i = sqrt(U_i (1 - U_i))."""
    s = np.sqrt(users_accuracy * (1 - users_accuracy))
    return int(math.ceil((float(np.sum(weights * s)) / target_se) ** 2))


def allocate(mapped: dict[int, int], design: Design) -> dict[int, int]:
    """Points per map class: its share of Cochran's size, at least ``min_per_class``, at most its pixels."""
    classes = sorted(mapped)
    pixels = np.array([mapped[c] for c in classes], dtype=float)
    weights = pixels / pixels.sum()
    guesses = np.array(
        [design.users_accuracy.get(c, design.expected_users_accuracy) for c in classes]
    )
    n = sample_size(weights, guesses, design.target_se)
    return {
        c: int(min(mapped[c], max(design.min_per_class, round(n * w))))
        for c, w in zip(classes, weights)
    }


def class_pixels(map_path: str | Path) -> dict[int, int]:
    """Pixels per class of a map, window by window."""
    counts: dict[int, int] = {}
    with rasterio.open(map_path) as ds:
        for _, win in ds.block_windows(1):
            values, n = np.unique(ds.read(1, window=win), return_counts=True)
            for v, k in zip(values.tolist(), n.tolist()):
                if v != ds.nodata:
                    counts[v] = counts.get(v, 0) + k
    return counts


def draw(map_path: str | Path, design: Design) -> pd.DataFrame:
    """The sample: one row per point (pixel centre) with ``point_id``, ``stratum``, ``stratum_pixels``,
    ``map_class``, its name, ``x``, ``y`` (map CRS) and an empty ``reference``; bounded memory (two passes of
    windows: count, then pick the drawn ranks of each class)."""
    mapped = class_pixels(map_path)
    if not mapped:
        raise LcflowError(f"map {map_path} has no classified pixel to draw reference points from")
    sizes = allocate(mapped, design)
    rng = np.random.default_rng(design.seed)
    wanted = {c: np.sort(rng.choice(mapped[c], size=sizes[c], replace=False)) for c in mapped}
    seen = {c: 0 for c in mapped}
    row_parts: list[np.ndarray] = []
    col_parts: list[np.ndarray] = []
    stratum_parts: list[np.ndarray] = []
    with rasterio.open(map_path) as ds:
        for _, win in ds.block_windows(1):
            block = ds.read(1, window=win)
            for c in mapped:
                r, cl = np.nonzero(block == c)
                if r.size == 0:
                    continue
                lo, hi = np.searchsorted(wanted[c], [seen[c], seen[c] + r.size])
                picked = wanted[c][lo:hi] - seen[c]
                row_parts.append(r[picked] + int(win.row_off))
                col_parts.append(cl[picked] + int(win.col_off))
                stratum_parts.append(np.full(picked.size, c))
                seen[c] += r.size
        transform = ds.transform
    rows, cols = np.concatenate(row_parts), np.concatenate(col_parts)
    strata = np.concatenate(stratum_parts)
    # the interpreter must not see the points grouped by map class
    order = rng.permutation(rows.size)
    rows, cols, strata = rows[order], cols[order], strata[order]
    xs, ys = rasterio.transform.xy(transform, rows, cols)
    names = read_tag(map_path, "class_names") or {}
    return pd.DataFrame(
        {
            "point_id": np.arange(1, rows.size + 1),
            "stratum": strata.astype(int),
            "stratum_pixels": [mapped[int(s)] for s in strata],
            "map_class": strata.astype(int),
            "map_class_name": [names.get(str(s), str(s)) for s in strata],
            "x": np.asarray(xs),
            "y": np.asarray(ys),
            REFERENCE: pd.array([pd.NA] * rows.size, dtype="Int64"),
        }
    )


#: the layer of the GeoPackage that design-sample writes, and that assess reads where a file has several
LAYER = "reference_points"


def write(
    points: pd.DataFrame, map_path: str | Path, out: str | Path, csv: str | Path | None = None
) -> None:
    """The sample as a GeoPackage of points in the map's CRS (for QGIS) and optionally as CSV (with lon/lat);
    each written under a temporary name, then renamed."""
    import geopandas as gpd

    from lcflow.common.atomic import atomic_path, write_text

    crs = Grid.of(map_path).crs
    frame = gpd.GeoDataFrame(
        points, geometry=gpd.points_from_xy(points["x"], points["y"]), crs=crs.to_wkt()
    )
    with atomic_path(out, suffix=Path(out).suffix) as tmp:
        tmp.unlink()  # GDAL creates the GeoPackage itself
        frame.to_file(tmp, layer=LAYER)
    if csv is not None:
        wgs84 = frame.to_crs(4326)
        table = points.assign(lon=wgs84.geometry.x.round(7), lat=wgs84.geometry.y.round(7))
        write_text(csv, table.to_csv(index=False))
