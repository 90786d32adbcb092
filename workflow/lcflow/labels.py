"""CORINE Land Cover onto the Sentinel-2 tile grid, mapped to the configured nomenclature."""

from pathlib import Path

import numpy as np
import rasterio
import rasterio.errors
import rasterio.transform
from affine import Affine
from rasterio.crs import CRS
from rasterio.warp import Resampling, reproject, transform_bounds
from rasterio.windows import Window, from_bounds

from .errors import LcflowError
from .nomenclature import Nomenclature, clc_codes_from_raster
from .raster import Grid, write_cog


def corine_window_codes(corine: str | Path, crs, bounds, where: str) -> tuple[np.ndarray, Affine, CRS]:
    """CLC level-3 codes of the CORINE cells covering ``bounds`` (in ``crs``), with a 2-cell margin;
    their transform and CRS. Only that window is read; its values must be CORINE codes of one kind."""
    corine = Path(corine)
    if not corine.exists():
        raise LcflowError(f"CORINE raster {corine} does not exist")
    try:
        src = rasterio.open(corine)
    except rasterio.errors.RasterioIOError as exc:
        raise LcflowError(f"CORINE raster {corine} cannot be read as a raster ({exc})") from exc
    with src:
        if src.crs is None:
            raise LcflowError(f"CORINE raster {corine} has no CRS")
        left, bottom, right, top = transform_bounds(crs, src.crs, *bounds, densify_pts=21)
        win = from_bounds(left, bottom, right, top, src.transform).round_offsets().round_lengths()
        if not _overlaps(win, src):
            raise LcflowError(f"CORINE raster {corine} does not cover the area of {where} {list(bounds)} ({crs})")
        col0, row0 = max(int(win.col_off) - 2, 0), max(int(win.row_off) - 2, 0)
        col1 = min(int(win.col_off + win.width) + 2, src.width)
        row1 = min(int(win.row_off + win.height) + 2, src.height)
        win = Window(col0, row0, col1 - col0, row1 - row0)
        try:
            values = src.read(1, window=win)
        except rasterio.errors.RasterioIOError as exc:
            raise LcflowError(f"CORINE raster {corine}: reading the window of {where} failed ({exc})") from exc
        codes = clc_codes_from_raster(values, src.nodata, where=f"{corine} in {where}")
        return codes, src.window_transform(win), src.crs


#: how CORINE cells become tile pixels: ``auto`` takes nearest on a finer tile grid, mode on a coarser one
RESAMPLING = ("auto", "nearest", "mode")


def clc_on_grid(corine: str | Path, grid: Grid, where: str = "the tile", resampling: str = "auto") -> np.ndarray:
    """CLC level-3 codes of a CORINE raster (grid or CLC codes, any CRS) on ``grid``; 0 outside classes.

    Categorical data: the CORINE cells are decoded first (grid codes and CLC codes map one to one, so
    decoding commutes with both methods), then warped by GDAL (as ``gdalwarp -r near`` / ``-r mode``),
    reading only the window that covers the tile. ``auto``: nearest where a tile pixel is no larger
    than a CORINE cell (the 100 m product onto 10 m Sentinel-2), the mode of the covered cells where
    it is larger.
    """
    if resampling not in RESAMPLING:
        raise LcflowError(f"label resampling {resampling!r}: expected one of {', '.join(RESAMPLING)}")
    codes, transform, crs = corine_window_codes(corine, grid.crs, grid.bounds, where)
    if resampling == "auto":
        resampling = "nearest" if _pixel_area(grid.transform) <= _cell_area_in(transform, crs, codes.shape, grid.crs) \
            else "mode"
    out = np.zeros((grid.height, grid.width), dtype=np.uint16)
    reproject(codes, out, src_transform=transform, src_crs=crs, src_nodata=0,
              dst_transform=grid.transform, dst_crs=grid.crs, dst_nodata=0, resampling=Resampling[resampling])
    return out


def _pixel_area(transform: Affine) -> float:
    return abs(transform.a * transform.e - transform.b * transform.d)


def _cell_area_in(transform: Affine, crs, shape: tuple[int, int], target_crs) -> float:
    """Area of one source cell measured in the target CRS (over the window read)."""
    left, bottom, right, top = rasterio.transform.array_bounds(*shape, transform)
    l2, b2, r2, t2 = transform_bounds(crs, target_crs, left, bottom, right, top)
    return abs((r2 - l2) * (t2 - b2)) / (shape[0] * shape[1])


def _overlaps(win, src) -> bool:
    return win.col_off < src.width and win.row_off < src.height and win.col_off + win.width > 0 and win.row_off + win.height > 0


def run(corine: str | Path, grid_of: str | Path, out: str | Path, nomenclature: Nomenclature,
        resampling: str = "auto") -> np.ndarray:
    """Write the class raster of one tile, on the grid of ``grid_of`` (its cube); return the classes."""
    grid = Grid.of(grid_of)
    clc = clc_on_grid(corine, grid, resampling=resampling)
    if not clc.any():
        raise LcflowError(f"CORINE raster {corine} has no class inside the tile area {grid.bounds} ({grid.crs})")
    classes = nomenclature.apply(clc)
    present = sorted(int(c) for c in np.unique(classes) if c != nomenclature.nodata)
    write_cog(out, classes, grid, nodata=nomenclature.nodata, colors=nomenclature.colors,
              tags={"nomenclature": nomenclature.name,
                    "class_names": {str(c): nomenclature.names[c] for c in present},
                    "class_colors": {str(c): nomenclature.colors.get(c) for c in present}})
    return classes
