"""Labels onto the Sentinel-2 tile grid, mapped to the configured nomenclature.

The source is CORINE Land Cover (a raster of grid or CLC codes, or polygons with a ``Code_18``-style
column, any CRS) or the user's own reference data (polygons or points with a code column, mapped by a
nomenclature file). A CLC change layer can take the pixels it marks out of the labels.
"""

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rasterio
import rasterio.errors
import rasterio.transform
from affine import Affine
from rasterio.crs import CRS
from rasterio.warp import Resampling, reproject, transform_bounds
from rasterio.windows import Window, from_bounds

from lcflow.common.raster import Grid, write_cog
from lcflow.defaults import default
from lcflow.errors import LcflowError
from lcflow.labels import vector as vector_labels
from lcflow.labels.nomenclature import (
    CLC_NOT_A_CLASS,
    Nomenclature,
    clc_codes_from_raster,
    clc_legend,
)
from lcflow.labels.vector import NO_CODE

log = logging.getLogger(__name__)


def _read_window(
    path: Path, crs, bounds, where: str, what: str
) -> tuple[np.ndarray, Affine, CRS, float | None]:
    """Values of the cells of raster ``path`` covering ``bounds`` (in ``crs``), with a 2-cell margin; their
    transform, CRS and nodata. Only that window is read."""
    if not path.exists():
        raise LcflowError(f"{what} {path} does not exist")
    try:
        src = rasterio.open(path)
    except rasterio.errors.RasterioIOError as exc:
        raise LcflowError(f"{what} {path} cannot be read as a raster ({exc})") from exc
    with src:
        if src.crs is None:
            raise LcflowError(f"{what} {path} has no CRS")
        left, bottom, right, top = transform_bounds(crs, src.crs, *bounds, densify_pts=21)
        win = from_bounds(left, bottom, right, top, src.transform).round_offsets().round_lengths()
        if not _overlaps(win, src):
            raise LcflowError(
                f"{what} {path} does not cover the area of {where} {list(bounds)} ({crs})"
            )
        col0, row0 = max(int(win.col_off) - 2, 0), max(int(win.row_off) - 2, 0)
        col1 = min(int(win.col_off + win.width) + 2, src.width)
        row1 = min(int(win.row_off + win.height) + 2, src.height)
        win = Window(col0, row0, col1 - col0, row1 - row0)
        try:
            values = src.read(1, window=win)
        except rasterio.errors.RasterioIOError as exc:
            raise LcflowError(
                f"{what} {path}: reading the window of {where} failed ({exc})"
            ) from exc
        return values, src.window_transform(win), src.crs, src.nodata


def corine_window_codes(
    corine: str | Path, crs, bounds, where: str
) -> tuple[np.ndarray, Affine, CRS]:
    """CLC level-3 codes of the CORINE cells covering ``bounds`` (in ``crs``), with a 2-cell margin;
    their transform and CRS. Only that window is read; its values must be CORINE codes of one kind."""
    corine = Path(corine)
    values, transform, src_crs, nodata = _read_window(corine, crs, bounds, where, "CORINE raster")
    codes = clc_codes_from_raster(values, nodata, where=f"{corine} in {where}")
    return codes, transform, src_crs


#: how CORINE cells become tile pixels: ``auto`` takes nearest on a finer tile grid, mode on a coarser one
RESAMPLING = ("auto", "nearest", "mode")


def clc_on_grid(
    corine: str | Path, grid: Grid, where: str = "the tile", resampling: str = "auto"
) -> np.ndarray:
    """CLC level-3 codes of a CORINE raster (grid or CLC codes, any CRS) on ``grid``; 0 outside classes.

    Categorical data: the CORINE cells are decoded first (grid codes and CLC codes map one to one, so
    decoding commutes with both methods), then warped by GDAL (as ``gdalwarp -r near`` / ``-r mode``),
    reading only the window that covers the tile. ``auto``: nearest where a tile pixel is no larger
    than a CORINE cell (the 100 m product onto 10 m Sentinel-2), the mode of the covered cells where
    it is larger.
    """
    _check_resampling(resampling)
    codes, transform, crs = corine_window_codes(corine, grid.crs, grid.bounds, where)
    resampling = _resampling(resampling, grid, transform, crs, codes.shape)
    out = np.zeros((grid.height, grid.width), dtype=np.uint16)
    reproject(
        codes,
        out,
        src_transform=transform,
        src_crs=crs,
        src_nodata=0,
        dst_transform=grid.transform,
        dst_crs=grid.crs,
        dst_nodata=0,
        resampling=Resampling[resampling],
    )
    return out


def _check_resampling(resampling: str) -> None:
    if resampling not in RESAMPLING:
        raise LcflowError(
            f"label resampling {resampling!r}: expected one of {', '.join(RESAMPLING)}"
        )


def _resampling(resampling: str, grid: Grid, transform: Affine, crs, shape: tuple[int, int]) -> str:
    """``auto`` resolved: nearest where a tile pixel is no larger than a source cell, else mode."""
    if resampling != "auto":
        return resampling
    return (
        "nearest"
        if _pixel_area(grid.transform) <= _cell_area_in(transform, crs, shape, grid.crs)
        else "mode"
    )


def _pixel_area(transform: Affine) -> float:
    return abs(transform.a * transform.e - transform.b * transform.d)


def _cell_area_in(transform: Affine, crs, shape: tuple[int, int], target_crs) -> float:
    """Area of one source cell measured in the target CRS (over the window read)."""
    left, bottom, right, top = rasterio.transform.array_bounds(*shape, transform)
    l2, b2, r2, t2 = transform_bounds(crs, target_crs, left, bottom, right, top)
    return abs((r2 - l2) * (t2 - b2)) / (shape[0] * shape[1])


def _overlaps(win, src) -> bool:
    return (
        win.col_off < src.width
        and win.row_off < src.height
        and win.col_off + win.width > 0
        and win.row_off + win.height > 0
    )


@dataclass(frozen=True)
class LabelSource:
    """Where a tile's labels come from: CORINE (``corine``: CLC codes) or the user's own reference data.

    ``code_column`` and ``layer`` concern vector files (for CORINE the column defaults to the single
    ``Code_NN`` one); ``resampling`` concerns rasters (polygons are burnt by pixel centre)."""

    path: Path
    corine: bool = True
    code_column: str | None = None
    layer: str | None = None
    resampling: str = "auto"

    def __post_init__(self):
        _check_resampling(self.resampling)

    @property
    def what(self) -> str:
        return ("CORINE " if self.corine else "reference ") + (
            "layer" if vector_labels.is_vector(self.path) else "raster"
        )


def _source(source: "LabelSource | str | Path") -> LabelSource:
    return source if isinstance(source, LabelSource) else LabelSource(Path(source))


def codes_in_area(source: LabelSource, crs, bounds, where: str) -> dict[int, int]:
    """Source codes present within ``bounds`` (in ``crs``): code -> cells or features; the up-front check
    that the source covers the area, is readable, and has codes the nomenclature can be checked on."""
    if vector_labels.is_vector(source.path):
        features, _ = _features(source, crs, bounds, where)
        codes, counts = np.unique(features["code"].to_numpy(), return_counts=True)
    else:
        if source.corine:
            values = corine_window_codes(source.path, crs, bounds, where)[0]
            codes, counts = np.unique(values[values > 0], return_counts=True)
        else:
            values, _, _, nodata = _read_window(Path(source.path), crs, bounds, where, source.what)
            codes, counts = np.unique(
                values[values != nodata] if nodata is not None else values, return_counts=True
            )
    return {int(c): int(n) for c, n in zip(codes, counts)}


def _features(source: LabelSource, crs, bounds, where: str):
    """The features of a vector source in the area, with their codes checked; and their geometry kind."""
    layer = vector_labels.open_layer(source.path, source.layer)
    column = vector_labels.code_column(layer, source.code_column, source.corine)
    features, geometry = vector_labels.read_in_area(
        layer, crs, bounds, where, column, mend=source.corine
    )
    if features.empty:
        raise LcflowError(
            f"{source.what} {source.path} has no feature within the area of {where} {list(bounds)} ({crs})"
        )
    if source.corine:
        unknown = (
            set(features["code"].tolist()) - {e.clc_code for e in clc_legend()} - CLC_NOT_A_CLASS
        )
        if unknown:
            raise LcflowError(
                f"{source.path}: column {column!r} holds value(s) {', '.join(map(str, sorted(unknown)[:10]))} "
                f"in {where} that are not CLC level-3 codes (111..523)"
            )
        features = features[~features["code"].isin(CLC_NOT_A_CLASS)]
    return features, (geometry, column)


def source_on_grid(
    source: "LabelSource | str | Path", grid: Grid, where: str = "the tile"
) -> tuple[np.ndarray, dict]:
    """Source codes on ``grid`` (int32, :data:`~lcflow.labels.vector.NO_CODE` where none), and a record of
    what was read (kept in the labels raster's metadata)."""
    source = _source(source)
    record: dict[str, object] = {
        "path": str(source.path),
        "kind": "corine" if source.corine else "reference",
    }
    if vector_labels.is_vector(source.path):
        features, (geometry, column) = _features(source, grid.crs, grid.bounds, where)
        record.update(
            format="vector", code_column=column, geometry=geometry, features=int(len(features))
        )
        if geometry == "points":
            codes, stats = vector_labels.place_points(features, grid, where)
            record.update(stats)
        else:
            codes = vector_labels.burn(features, grid)
        return codes, record
    record.update(format="raster")
    if source.corine:
        clc = clc_on_grid(source.path, grid, where, source.resampling)
        return np.where(clc > 0, clc.astype(np.int32), NO_CODE).astype(np.int32), {
            **record,
            "geometry": "areas",
        }
    values, transform, crs, nodata = _read_window(
        Path(source.path), grid.crs, grid.bounds, where, source.what
    )
    values = values.astype(np.int32)
    if nodata is not None:
        values[values == nodata] = NO_CODE
    out = np.full((grid.height, grid.width), NO_CODE, dtype=np.int32)
    reproject(
        values,
        out,
        src_transform=transform,
        src_crs=crs,
        src_nodata=NO_CODE,
        dst_transform=grid.transform,
        dst_crs=grid.crs,
        dst_nodata=NO_CODE,
        resampling=Resampling[_resampling(source.resampling, grid, transform, crs, values.shape)],
    )
    return out, {**record, "geometry": "areas"}


def change_mask(
    change: str | Path, grid: Grid, where: str = "the tile", layer: str | None = None
) -> np.ndarray:
    """Pixels a CLC change layer marks (any feature of a vector layer, any value but 0 and nodata of a
    raster), widened to every pixel that touches a change: those pixels' labels are not trusted."""
    change = Path(change)
    if vector_labels.is_vector(change):
        layer_ = vector_labels.open_layer(change, layer, "labels.change_layer")
        features, _ = vector_labels.read_in_area(
            layer_, grid.crs, grid.bounds, where, None, mend=True
        )
        return vector_labels.burn(features, grid, all_touched=True) != NO_CODE
    values, transform, crs, nodata = _read_window(
        change, grid.crs, grid.bounds, where, "change layer"
    )
    marked = ((values != 0) & ((values != nodata) if nodata is not None else True)).astype(np.uint8)
    out = np.zeros((grid.height, grid.width), dtype=np.uint8)
    reproject(
        marked,
        out,
        src_transform=transform,
        src_crs=crs,
        dst_transform=grid.transform,
        dst_crs=grid.crs,
        resampling=Resampling.max,
    )
    return out > 0


@dataclass(frozen=True)
class Unlabelled:
    """How much of a tile CORINE may leave without a class: a warning above ``warn``, refused above ``max``
    (a raster that covers part of the tile, or holds no data there, would train and map on that part only)."""

    warn: float = default("labels.unlabelled_warn")
    max: float = default("labels.unlabelled_max")

    def check(self, share: float, source: "LabelSource", where: str) -> None:
        if not source.corine:
            return  # reference data label parts of a tile by nature
        said = (
            f"{source.what} {source.path} gives no class to {100 * share:.1f} % of {where} (outside its coverage, "
            "no data or unclassified)"
        )
        if share > self.max:
            raise LcflowError(
                f"{said}, above labels.unlabelled_max ({100 * self.max:g} %): give a CORINE file that "
                "covers the tile, or raise the share"
            )
        if share > self.warn:
            log.warning(
                "%s, above labels.unlabelled_warn (%g %%): only the rest is sampled and assessed",
                said,
                100 * self.warn,
            )


def unlabelled_share(source: LabelSource, crs, bounds, where: str) -> float:
    """The share of an area the source gives no class, read on a grid of at most 200 x 200 cells of at least
    CORINE's 100 m: the check before any job, without reading the source at the tile's resolution."""
    side = max(bounds[2] - bounds[0], bounds[3] - bounds[1])
    cells = min(200, max(1, int(side // 100)))  # a side's cells: the grid ends on the area's edges
    grid = Grid.from_bounds(crs, tuple(bounds), side / cells)
    codes, _ = source_on_grid(source, grid, where)
    return float((codes == NO_CODE).mean())


def run(
    source: "LabelSource | str | Path",
    grid_of: str | Path,
    out: str | Path,
    nomenclature: Nomenclature,
    change: str | Path | None = None,
    change_layer: str | None = None,
    unlabelled: Unlabelled = Unlabelled(),
) -> np.ndarray:
    """Write the class raster of one tile, on the grid of ``grid_of`` (its cube); return the classes.

    Every source code on the grid must be mapped or ignored by the nomenclature (checked before writing);
    pixels of ``change`` (a CLC change layer) are left unlabelled; CORINE leaving more of the tile without
    a class than ``unlabelled`` allows is refused, or warned about.

    Args:
        source: CORINE or one's own polygons or points (a raster or a vector layer), any CRS.
        grid_of: the raster whose grid the classes take (the tile's cube).
        out: the class raster to write.
        nomenclature: the classes, and how the source's codes map onto them.
        change: a CLC change layer (raster or vector) whose changed pixels stay unlabelled; None: none.
        change_layer: the layer of ``change`` where its file holds several.
        unlabelled: how much of the tile may stay without a class, with a warning and refused beyond.
    """
    source = _source(source)
    grid = Grid.of(grid_of)
    codes, record = source_on_grid(source, grid)
    present = codes[codes != NO_CODE]
    if present.size == 0:
        raise LcflowError(
            f"{source.what} {source.path} has no class inside the tile area {grid.bounds} ({grid.crs})"
        )
    unlabelled.check(1 - present.size / codes.size, source, f"the tile area {list(grid.bounds)}")
    values, counts = np.unique(present, return_counts=True)
    nomenclature.check_covers(
        dict(zip(values.tolist(), counts.tolist())), f"{source.path} in the tile area"
    )
    if change is not None:
        marked = change_mask(change, grid, layer=change_layer)
        record["change_layer"] = {
            "path": str(change),
            "excluded_pixels": int((marked & (codes != NO_CODE)).sum()),
        }
        codes[marked] = NO_CODE
        log.info(
            "change layer %s: %d labelled pixels left out",
            change,
            record["change_layer"]["excluded_pixels"],
        )
    classes = nomenclature.apply(codes)
    values, counts = np.unique(classes, return_counts=True)
    pixels = {int(c): int(n) for c, n in zip(values, counts) if c != nomenclature.nodata}
    if not pixels:
        raise LcflowError(
            f"{source.path}: no labelled pixel is left in the tile area {grid.bounds} ({grid.crs}) "
            "once ignored codes and the change layer are taken out"
        )
    present = sorted(pixels)
    log.info("labels from %s: %s", source.path, pixels)
    write_cog(
        out,
        classes,
        grid,
        nodata=nomenclature.nodata,
        colors=nomenclature.colors,
        names={c: nomenclature.names[c] for c in present},
        tags={
            "nomenclature": nomenclature.name,
            "class_names": {str(c): nomenclature.names[c] for c in present},
            "class_colors": {str(c): nomenclature.colors.get(c) for c in present},
            "label_source": record,
        },
    )
    return classes
