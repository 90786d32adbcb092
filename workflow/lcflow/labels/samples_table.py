"""The samples table: lcflow's public interchange format (parquet), read, checked and written here.

One row per sample: integer ``label``; optional ``split`` (train/val/test), ``tile``, ``year``, ``row``,
``col``, ``x``, ``y`` (in the metadata's ``crs``), ``lat``, ``lon`` (degrees, WGS 84); one column per band
and time step named ``{band}_t{index:02d}``, where a band is a Sentinel-2 band (``B04``) or a spectral
index (``NDVI``), any number of them and of time steps. Time-step dates, class names and colours travel
in the parquet schema metadata under the key ``lcflow``.
NaN cells (missed observations) are normal.

Patch variant: a ``patch`` column (fixed-size list of int16) holds the cube around each sample,
``size`` x ``size`` pixels centred on it, laid out (band columns of the cube, row, col) with the
band columns named in the metadata's ``patch.bands`` and missing values as ``patch.nodata``.
"""

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from lcflow.common import time_steps
from lcflow.common.atomic import atomic_path
from lcflow.errors import LcflowError
from lcflow.retrieve.sentinel2 import FEATURES

BAND_COLUMN = re.compile(r"^([A-Z][A-Z0-9]*)_t(\d{2,})$")
SPLITS = ("train", "val", "test")
META_KEY = b"lcflow"
PATCH = "patch"


@dataclass
class SampleTable:
    """A checked samples table: the frame, its band/time layout and its metadata."""

    frame: pd.DataFrame
    bands: list[str]
    steps: int
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def classes(self) -> list[int]:
        return sorted(int(c) for c in self.frame["label"].unique())

    def columns_for(self, bands: list[str], steps: int) -> list[str]:
        return [f"{b}_t{k:02d}" for k in range(steps) for b in bands]

    def features(self, bands: list[str] | None = None, steps: int | None = None) -> np.ndarray:
        """Band values as (samples, time steps, bands) float32, NaN kept."""
        bands, steps = bands or self.bands, steps if steps is not None else self.steps
        missing = [c for c in self.columns_for(bands, steps) if c not in self.frame.columns]
        if missing:
            raise LcflowError(f"samples table lacks band column(s) {_short(missing)}")
        values = self.frame[self.columns_for(bands, steps)].to_numpy(
            dtype=np.float32, na_value=np.nan
        )
        return values.reshape(len(self.frame), steps, len(bands))

    def split(self, name: str) -> "SampleTable":
        """Rows of one split; the whole table when it has no ``split`` column."""
        if "split" not in self.frame.columns:
            return self
        return SampleTable(
            self.frame[self.frame["split"] == name].reset_index(drop=True),
            self.bands,
            self.steps,
            self.meta,
        )

    @property
    def patch_size(self) -> int:
        """Side of the patches in pixels; 0 for a table without them."""
        return int(self.meta["patch"]["size"]) if PATCH in self.frame.columns else 0

    def patches(self, bands: list[str] | None = None, steps: int | None = None) -> np.ndarray:
        """Patches as (samples, time steps, bands, size, size) float32, NaN where nothing was observed."""
        if not self.patch_size:
            raise LcflowError("samples table has no patches (write it with sample.patch_px > 0)")
        bands, steps = bands or self.bands, steps if steps is not None else self.steps
        info = self.meta["patch"]
        missing = [c for c in self.columns_for(bands, steps) if c not in info["bands"]]
        if missing:
            raise LcflowError(f"samples table patches lack band column(s) {_short(missing)}")
        pick = [info["bands"].index(c) for c in self.columns_for(bands, steps)]
        size = self.patch_size
        raw = np.stack(self.frame[PATCH].to_numpy()).reshape(
            len(self.frame), len(info["bands"]), size, size
        )[:, pick]
        out = raw.astype(np.float32)
        out[raw == int(info["nodata"])] = np.nan
        return out.reshape(len(self.frame), steps, len(bands), size, size)

    def latlon(self, where: str = "samples table") -> np.ndarray:
        """Latitude and longitude of every row in degrees (samples, 2): its ``lat``/``lon`` columns, else
        ``x``/``y`` in the metadata's ``crs``."""
        if {"lat", "lon"} <= set(self.frame.columns):
            return self.frame[["lat", "lon"]].to_numpy(np.float32)
        if not {"x", "y"} <= set(self.frame.columns) or not self.meta.get("crs"):
            raise LcflowError(
                f"{where} gives no position of its samples: it needs lat/lon columns, or x/y columns "
                "with a crs in its metadata (lcflow sample writes both)"
            )
        from lcflow.common.position import to_latlon

        return to_latlon(
            self.frame["x"].to_numpy(float), self.frame["y"].to_numpy(float), self.meta["crs"]
        )

    def observed(self) -> np.ndarray:
        """Per row: True where at least one band value is present (a row of NaN only carries no signal)."""
        return np.isfinite(self.features()).any(axis=(1, 2))

    def rows(self, keep: np.ndarray) -> "SampleTable":
        return SampleTable(
            self.frame[keep].reset_index(drop=True), self.bands, self.steps, self.meta
        )

    def class_names(self) -> dict[int, str]:
        names = {int(k): v for k, v in self.meta.get("class_names", {}).items()}
        return {c: names.get(c, str(c)) for c in self.classes}


def _short(items: list[str], n: int = 8) -> str:
    return ", ".join(items[:n]) + (f" ... ({len(items)} in all)" if len(items) > n else "")


def band_layout(columns: list[str], where: str) -> tuple[list[str], int]:
    """Bands and number of time steps from the column names; every band needs every step."""
    found: dict[str, set[int]] = {}
    for c in columns:
        m = BAND_COLUMN.match(c)
        if m:
            found.setdefault(m.group(1), set()).add(int(m.group(2)))
    if not found:
        raise LcflowError(f"{where}: no band columns (named like B04_t03 or NDVI_t03)")
    unknown = sorted(b for b in found if b not in FEATURES)
    if unknown:
        raise LcflowError(
            f"{where}: band column(s) of unknown band(s) {unknown}; known: {', '.join(FEATURES)}"
        )
    steps = max(max(s) for s in found.values()) + 1
    bands = [b for b in FEATURES if b in found]
    missing = [f"{b}_t{k:02d}" for k in range(steps) for b in bands if k not in found[b]]
    if missing:
        raise LcflowError(f"{where}: missing band column(s) {_short(missing)}")
    return bands, steps


#: the largest band value a table may hold: Sentinel-2 DNs are below 2 ** 16, reflectances 0..1, indices -1..1;
#: a value past this is an export's fill value or an error, and would swamp every statistic of its band
MAX_BAND_VALUE = 1e6


def check(
    frame: pd.DataFrame, where: str, meta: dict[str, Any] | None = None, min_classes: int = 2
) -> SampleTable:
    """Refuse a table that cannot train or evaluate a model, naming what is wrong."""
    if "label" not in frame.columns:
        raise LcflowError(f"{where}: no 'label' column")
    if frame.empty:
        raise LcflowError(f"{where}: no rows")
    if frame["label"].isna().any() or not pd.api.types.is_integer_dtype(frame["label"]):
        raise LcflowError(f"{where}: 'label' must be integer class codes without gaps")
    outside = frame["label"][(frame["label"] < 0) | (frame["label"] > 65534)]
    if len(outside):
        raise LcflowError(
            f"{where}: label value(s) {sorted(set(outside.tolist()))[:5]} are not class codes 0..65534"
        )
    if "split" in frame.columns:
        bad = sorted(set(frame["split"].astype(str)) - set(SPLITS))
        if bad:
            raise LcflowError(f"{where}: unknown split value(s) {bad}; use {list(SPLITS)}")
    n_classes = frame["label"].nunique()
    if n_classes < min_classes:
        raise LcflowError(
            f"{where}: only {n_classes} class ({frame['label'].iloc[0]}); at least {min_classes} needed"
        )
    bands, steps = band_layout(list(frame.columns), where)
    columns = [f"{b}_t{k:02d}" for k in range(steps) for b in bands]
    not_numbers = [
        c
        for c in columns
        if not pd.api.types.is_numeric_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c])
    ]
    if not_numbers:
        raise LcflowError(
            f"{where}: band column(s) {_short(not_numbers)} are not numeric "
            f"({frame[not_numbers[0]].dtype}); band values are numbers, NaN where missing"
        )
    values = frame[columns].to_numpy(dtype=np.float64, na_value=np.nan)
    infinite = np.isinf(values)
    if infinite.any():
        bad = [columns[i] for i in np.flatnonzero(infinite.any(axis=0))]
        raise LcflowError(
            f"{where}: {int(infinite.sum())} infinite value(s) in band column(s) {_short(bad)}; "
            "missing observations are NaN"
        )
    huge = np.abs(np.nan_to_num(values)) > MAX_BAND_VALUE
    if huge.any():
        row, col = np.argwhere(huge)[0]
        raise LcflowError(
            f"{where}: {int(huge.sum())} value(s) beyond +-{MAX_BAND_VALUE:.0e} ({values[row, col]:g} in "
            f"{columns[col]}, row {row}): no reflectance in any scale (0..1, or DN x 10000) nor spectral "
            "index is that large; missing observations are NaN"
        )
    if PATCH in frame.columns:
        info = (meta or {}).get("patch") or {}
        if not {"size", "bands", "nodata"} <= set(info):
            raise LcflowError(
                f"{where}: a 'patch' column needs patch size, bands and nodata in the metadata"
            )
        expected = len(info["bands"]) * int(info["size"]) ** 2
        lengths = {len(v) for v in frame[PATCH].head(1000)}
        if lengths != {expected}:
            raise LcflowError(
                f"{where}: patches of {sorted(lengths)} values; {len(info['bands'])} band columns x "
                f"{info['size']}^2 pixels = {expected} expected"
            )
    if meta and meta.get("time_steps") is not None:
        time_steps.parse(meta["time_steps"], steps, where)
    return SampleTable(frame.reset_index(drop=True), bands, steps, meta or {})


def read(paths: str | Path | Sequence[str | Path], min_classes: int = 2) -> SampleTable:
    """Read and check one or more tables (e.g. several tiles and years) as one."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    twice = [
        p
        for i, p in enumerate(paths)
        if Path(p).resolve() in {Path(q).resolve() for q in paths[:i]}
    ]
    if twice:
        raise LcflowError(
            f"samples table {twice[0]} is given twice: its rows would count double; name each table once"
        )
    frames: list[pd.DataFrame] = []
    meta: dict[str, Any] = {}
    patch_layouts: set[Any] = set()
    layouts: list[Any] = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise LcflowError(f"samples table {p} does not exist")
        try:
            table = pq.read_table(p)
        except (pa.ArrowInvalid, OSError) as exc:
            raise LcflowError(f"samples table {p} is not a readable parquet file: {exc}") from exc
        raw = (table.schema.metadata or {}).get(META_KEY)
        this = json.loads(raw) if raw else {}
        for key in ("class_names", "class_colors"):
            meta.setdefault(key, {}).update(this.get(key, {}))
        for key, value in this.items():
            meta.setdefault(key, value)
        patch_layouts.add(
            json.dumps(this.get("patch"), sort_keys=True) if PATCH in table.column_names else None
        )
        frame = table.to_pandas()
        if (
            len(paths) > 1
            and this.get("crs")
            and {"x", "y"} <= set(frame.columns)
            and "lat" not in frame.columns
        ):
            # tables of tiles in several UTM zones: each row's position in degrees, as one CRS cannot hold them
            from lcflow.common.position import to_latlon

            frame[["lat", "lon"]] = to_latlon(
                frame["x"].to_numpy(float), frame["y"].to_numpy(float), this["crs"]
            )
        frames.append(frame)
        if len(paths) > 1:
            layouts.append((p, band_layout(list(frame.columns), str(p))))
    other = next((layout for layout in layouts if layout[1] != layouts[0][1]), None)
    if other:  # concatenated, a table of fewer steps or other bands would read as rows with gaps
        (a, (bands_a, steps_a)), (b, (bands_b, steps_b)) = layouts[0], other
        raise LcflowError(
            f"samples tables disagree: {a} has {steps_a} time steps of {', '.join(bands_a)}, {b} has "
            f"{steps_b} of {', '.join(bands_b)}; the tables of one model share their bands and steps "
            "(cube.time_steps)"
        )
    if len(patch_layouts) > 1:
        raise LcflowError(
            f"samples tables {', '.join(map(str, paths))} mix patch layouts (or patches and none): "
            "write them all with the same sample.patch_px"
        )
    where = str(paths[0]) if len(paths) == 1 else f"samples tables {', '.join(map(str, paths))}"
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    return check(frame, where, meta, min_classes)


def write(
    frame: pd.DataFrame, path: str | Path, meta: dict[str, Any], patches: np.ndarray | None = None
) -> None:
    """Write a samples table with its metadata (and patches, int16, one row each), atomically."""
    if patches is None and PATCH in frame.columns:
        patches = np.stack(frame[PATCH].to_numpy())
    table = pa.Table.from_pandas(frame.drop(columns=[PATCH], errors="ignore"), preserve_index=False)
    if patches is not None:
        flat = np.ascontiguousarray(patches, dtype=np.int16).reshape(len(frame), -1)
        table = table.append_column(
            PATCH, pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel()), flat.shape[1])
        )
    table = table.replace_schema_metadata(
        {**(table.schema.metadata or {}), META_KEY: json.dumps(meta).encode()}
    )
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)
