"""CORINE Land Cover onto the Sentinel-2 tile grid, mapped to the configured nomenclature."""

from pathlib import Path

import numpy as np
import rasterio
from rasterio.warp import Resampling, reproject, transform_bounds
from rasterio.windows import from_bounds

from .errors import LcflowError
from .nomenclature import Nomenclature, clc_codes_from_raster
from .raster import Grid, write_cog


def clc_on_grid(corine: str | Path, grid: Grid) -> np.ndarray:
    """CLC level-3 codes of a CORINE raster (grid or CLC codes, any CRS) on ``grid``; 0 outside classes.

    Categorical data: the CORINE cells are decoded first, then warped by nearest neighbour (the
    Sentinel-2 grid is finer), reading only the window that covers the tile.
    """
    corine = Path(corine)
    if not corine.exists():
        raise LcflowError(f"CORINE raster {corine} does not exist")
    with rasterio.open(corine) as src:
        if src.crs is None:
            raise LcflowError(f"CORINE raster {corine} has no CRS")
        left, bottom, right, top = transform_bounds(grid.crs, src.crs, *grid.bounds, densify_pts=21)
        win = from_bounds(left, bottom, right, top, src.transform).round_offsets().round_lengths()
        win = win.intersection(rasterio.windows.Window(0, 0, src.width, src.height)) if _overlaps(win, src) else None
        if win is None:
            raise LcflowError(f"CORINE raster {corine} does not cover the tile area {grid.bounds} ({grid.crs})")
        pad = rasterio.windows.Window(max(win.col_off - 2, 0), max(win.row_off - 2, 0), 0, 0)
        win = rasterio.windows.Window(pad.col_off, pad.row_off,
                                      min(win.width + 4, src.width - pad.col_off), min(win.height + 4, src.height - pad.row_off))
        codes = clc_codes_from_raster(src.read(1, window=win))
        transform = src.window_transform(win)
        out = np.zeros((grid.height, grid.width), dtype=np.uint16)
        reproject(codes, out, src_transform=transform, src_crs=src.crs, src_nodata=0,
                  dst_transform=grid.transform, dst_crs=grid.crs, dst_nodata=0, resampling=Resampling.nearest)
    return out


def _overlaps(win, src) -> bool:
    return win.col_off < src.width and win.row_off < src.height and win.col_off + win.width > 0 and win.row_off + win.height > 0


def run(corine: str | Path, grid_of: str | Path, out: str | Path, nomenclature: Nomenclature) -> np.ndarray:
    """Write the class raster of one tile, on the grid of ``grid_of`` (its cube); return the classes."""
    grid = Grid.of(grid_of)
    clc = clc_on_grid(corine, grid)
    if not clc.any():
        raise LcflowError(f"CORINE raster {corine} has no class inside the tile area {grid.bounds} ({grid.crs})")
    classes = nomenclature.apply(clc)
    present = sorted(int(c) for c in np.unique(classes) if c != nomenclature.nodata)
    write_cog(out, classes, grid, nodata=nomenclature.nodata, colors=nomenclature.colors,
              tags={"nomenclature": nomenclature.name,
                    "class_names": {str(c): nomenclature.names[c] for c in present},
                    "class_colors": {str(c): nomenclature.colors.get(c) for c in present}})
    return classes
