"""Labels from vector layers (CORINE polygons, the user's own polygons or points) onto a tile grid.

Only the features within the tile area are read (a bounding-box filter on read, in the file's own
CRS), so a country-wide layer is never loaded whole; they are clipped to that box before being
reprojected, then burnt onto the grid by rasterio (a pixel takes the polygon under its centre:
``all_touched`` off) or, for points, placed in the pixel they fall in. geopandas reads every format
GDAL does through pyogrio (GeoPackage, shapefile, GeoJSON, FlatGeobuf) and GeoParquet through pyarrow.
"""

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import rasterio.features
import rasterio.transform
from rasterio.warp import transform_bounds

from lcflow.common.raster import Grid
from lcflow.errors import LcflowError

if TYPE_CHECKING:
    import geopandas as gpd

log = logging.getLogger(__name__)

#: file suffixes read as vector layers; anything else is read as a raster
VECTOR_SUFFIXES = (".gpkg", ".shp", ".geojson", ".json", ".fgb", ".parquet", ".geoparquet")
#: "no label" in the code rasters this module writes (source codes are >= 0)
NO_CODE = -1
#: column names of CLC codes in the official vector products (Code_18, CODE_12, ...)
CLC_CODE_COLUMN = re.compile(r"^code_\d\d$", re.IGNORECASE)


def is_vector(path: str | Path) -> bool:
    return Path(path).suffix.lower() in VECTOR_SUFFIXES


def _is_parquet(path: Path) -> bool:
    return path.suffix.lower() in (".parquet", ".geoparquet")


@dataclass(frozen=True)
class Layer:
    """What a vector layer holds, learnt without reading its features."""

    path: Path
    layer: str | None
    crs: object  # pyproj.CRS
    columns: list[str]
    geometry_column: str | None = None  # GeoParquet's primary geometry column (OGR names its own)


def open_layer(path: str | Path, layer: str | None = None, key: str = "labels.layer") -> Layer:
    """The layer's CRS and columns; a file with several layers needs ``layer`` named (config ``key``)."""
    import pyogrio
    import pyproj

    path = Path(path)
    if not path.exists():
        raise LcflowError(f"vector layer {path} does not exist")
    try:
        if _is_parquet(path):
            import pyarrow.parquet as pq

            schema = pq.read_schema(path)
            geo = json.loads((schema.metadata or {}).get(b"geo", b"null"))
            if not geo:
                raise LcflowError(
                    f"{path} is Parquet without GeoParquet metadata (no 'geo' key): not a vector layer"
                )
            crs = pyproj.CRS.from_user_input(
                geo["columns"][geo["primary_column"]].get("crs") or "OGC:CRS84"
            )
            columns = [n for n in schema.names if n not in geo["columns"] and n != "bbox"]
            return Layer(path, None, crs, columns, geo["primary_column"])
        layers = [str(n) for n in pyogrio.list_layers(path)[:, 0]]
        if layer is None and len(layers) > 1:
            raise LcflowError(
                f"{path} holds {len(layers)} layers ({', '.join(layers)}): name one ({key})"
            )
        if layer is not None and layer not in layers:
            raise LcflowError(f"{path} has no layer {layer!r} (layers: {', '.join(layers)})")
        info = pyogrio.read_info(path, layer=layer)
    except LcflowError:
        raise
    except Exception as exc:  # pyogrio/pyarrow errors of unreadable files have no common base
        raise LcflowError(f"{path} cannot be read as a vector layer ({exc})") from exc
    if not info.get("crs"):
        raise LcflowError(f"vector layer {path} has no CRS")
    return Layer(
        path, layer, pyproj.CRS.from_user_input(info["crs"]), [str(f) for f in info["fields"]]
    )


def code_column(layer: Layer, given: str | None, corine: bool) -> str:
    """The column of codes: the one given, else for CORINE the single ``Code_NN`` column."""
    if given is not None:
        if given not in layer.columns:
            raise LcflowError(
                f"{layer.path} has no column {given!r} (columns: {', '.join(layer.columns) or 'none'})"
            )
        return given
    found = [c for c in layer.columns if CLC_CODE_COLUMN.match(c)] if corine else []
    if len(found) == 1:
        return found[0]
    what = "one column of CLC codes named like Code_18" if corine else "the column of class codes"
    raise LcflowError(
        f"{layer.path}: name {what} with labels.code_column (columns: {', '.join(layer.columns) or 'none'})"
    )


def read_in_area(
    layer: Layer, crs, bounds, where: str, column: str | None, mend: bool = False
) -> "tuple[gpd.GeoDataFrame, str]":
    """The features of ``layer`` within ``bounds`` (in ``crs``), clipped to them and reprojected to ``crs``,
    with their codes (int64, column ``code``) when ``column`` is given; and ``"areas"`` or ``"points"``.

    An empty result is returned as is (no feature in the area); the caller decides what that means. A
    polygon that is not a valid geometry (a ring crossing itself) is mended (``shapely.make_valid``, with
    a warning) where ``mend`` (a published product's layer: CORINE, its changes), else refused naming it:
    what a person drew is theirs to mend.

    Args:
        layer: the vector file and its layer.
        crs: the CRS of ``bounds`` and of the features returned.
        bounds: xmin, ymin, xmax, ymax in ``crs``.
        where: the tile, named in the messages.
        column: the column of codes; None: geometries alone.
        mend: mend invalid polygons rather than refuse them.
    """
    import geopandas as gpd
    import shapely

    box = transform_bounds(crs, layer.crs, *bounds, densify_pts=21)
    columns = [column] if column else []
    try:
        if _is_parquet(layer.path):
            try:
                frame = gpd.read_parquet(
                    layer.path, columns=columns + [layer.geometry_column], bbox=box
                )
            except ValueError as exc:
                if "bbox" not in str(exc):
                    raise
                log.info(
                    "%s has no bbox covering column: the whole file is read for %s (write it with "
                    "write_covering_bbox=True to read only the area)",
                    layer.path,
                    where,
                )
                frame = gpd.read_parquet(layer.path, columns=columns + [layer.geometry_column])
                frame = frame.cx[box[0] : box[2], box[1] : box[3]]
        else:
            frame = gpd.read_file(
                layer.path,
                layer=layer.layer,
                columns=columns,
                bbox=box,
                engine="pyogrio",
                fid_as_index=True,
            )
    except Exception as exc:  # unreadable features: one line naming the file
        raise LcflowError(f"{layer.path}: reading the features of {where} failed ({exc})") from exc
    frame = frame[frame.geometry.notna() & ~frame.geometry.is_empty]
    if column:
        frame = frame.assign(code=_codes(frame[column], layer.path, column))
    kinds = set(frame.geometry.geom_type)
    if kinds - {"Polygon", "MultiPolygon", "Point", "MultiPoint"}:
        raise LcflowError(
            f"{layer.path}: {', '.join(sorted(kinds - {'Polygon', 'MultiPolygon', 'Point', 'MultiPoint'}))} "
            "features cannot be labels (polygons or points)"
        )
    points = bool(kinds) and kinds <= {"Point", "MultiPoint"}
    if kinds & {"Point", "MultiPoint"} and not points:
        raise LcflowError(
            f"{layer.path} mixes points and polygons in the area of {where}: give them as two files"
        )
    if points:
        frame = frame.explode(index_parts=False)
    else:
        invalid = ~frame.geometry.is_valid
        if invalid.any():
            first = frame.index[invalid][0]
            said = (
                f"{layer.path}: {int(invalid.sum())} polygon(s) in the area of {where} are not valid geometries, "
                f"the first feature {first}: {shapely.is_valid_reason(frame.geometry[first])}"
            )
            if not mend:
                raise LcflowError(
                    f"{said} (a ring that crosses itself has no inside to label); mend them (QGIS: Fix "
                    "geometries; shapely.make_valid) and run again"
                )
            log.warning("%s; mended with shapely.make_valid", said)
            frame = frame.assign(geometry=frame.geometry.make_valid().apply(_polygonal))
        frame = frame.clip(shapely.box(*box))
        frame = frame[~frame.geometry.is_empty]
    keep = ["code", "geometry"] if column else ["geometry"]
    return frame[keep].to_crs(crs), "points" if points else "areas"


def _polygonal(geometry):
    """The polygons of a mended geometry: make_valid may leave the lines and points of a collapsed ring
    beside them, which are no area to label."""
    import shapely

    if geometry.geom_type in ("Polygon", "MultiPolygon"):
        return geometry
    parts = [g for g in shapely.get_parts(geometry) if g.geom_type in ("Polygon", "MultiPolygon")]
    return shapely.union_all(parts) if parts else shapely.Polygon()


def _codes(values: pd.Series, path: Path, column: str) -> np.ndarray:
    """Integer codes (>= 0) of a column stored as numbers or as text (CORINE's ``Code_18`` is text)."""
    missing = int(values.isna().sum())
    if missing:
        raise LcflowError(f"{path}: {missing} feature(s) have no value in column {column!r}")
    numbers = pd.to_numeric(values.astype(str).str.strip(), errors="coerce")
    bad = sorted(
        {
            str(v)
            for v, n in zip(values, numbers)
            if pd.isna(n) or n != int(n) or n < 0 or n >= 2**31
        }
    )
    if bad:
        raise LcflowError(
            f"{path}: column {column!r} holds value(s) that are not integer codes >= 0: "
            f"{', '.join(bad[:10])}{' ...' if len(bad) > 10 else ''}"
        )
    return numbers.astype(np.int64).to_numpy()


def burn(features, grid: Grid, all_touched: bool = False) -> np.ndarray:
    """Codes (int32, :data:`NO_CODE` elsewhere) of polygons on ``grid``; a later feature wins an overlap.

    Without codes every feature burns 1 (a mask)."""
    shapes = (
        zip(features.geometry, features["code"])
        if "code" in features
        else ((g, 1) for g in features.geometry)
    )
    if features.empty:
        return np.full((grid.height, grid.width), NO_CODE, dtype=np.int32)
    return rasterio.features.rasterize(
        shapes,
        out_shape=(grid.height, grid.width),
        transform=grid.transform,
        fill=NO_CODE,
        all_touched=all_touched,
        dtype="int32",
    )


def place_points(features, grid: Grid, where: str) -> tuple[np.ndarray, dict]:
    """Codes (int32, :data:`NO_CODE` elsewhere) of the pixels points fall in, and how many were placed.

    A pixel holding points of different codes is left unlabelled (which one is right is unknown)."""
    out = np.full((grid.height, grid.width), NO_CODE, dtype=np.int32)
    xs, ys = features.geometry.x.to_numpy(), features.geometry.y.to_numpy()
    rows, cols = rasterio.transform.rowcol(grid.transform, xs, ys)
    rows, cols = np.asarray(rows), np.asarray(cols)
    inside = (rows >= 0) & (rows < grid.height) & (cols >= 0) & (cols < grid.width)
    flat = rows[inside] * grid.width + cols[inside]
    codes = features["code"].to_numpy()[inside]
    per_pixel = (
        pd.DataFrame({"pixel": flat, "code": codes}).groupby("pixel")["code"].agg(["min", "max"])
    )
    agree = per_pixel[per_pixel["min"] == per_pixel["max"]]
    out.reshape(-1)[agree.index.to_numpy()] = agree["min"].to_numpy()
    stats = {
        "points": int(len(features)),
        "outside": int((~inside).sum()),
        "pixels": int(len(agree)),
        "conflicting_pixels": int(len(per_pixel) - len(agree)),
    }
    if stats["conflicting_pixels"]:
        log.warning(
            "%s: %d pixel(s) hold points of different codes and are left unlabelled",
            where,
            stats["conflicting_pixels"],
        )
    return out, stats
