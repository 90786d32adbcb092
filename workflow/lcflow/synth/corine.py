"""A synthetic CORINE raster stored as the product is: EPSG:3035, 100 m, grid codes 1..44, 48 nodata.

It is generalised from the true map the way CLC is mapped: 100 m cells by majority, then patches
below the minimum mapping unit merged into their neighbours (GDAL's sieve), so labels are wrong near
boundaries and in small patches.
"""

import math

import numpy as np
import rasterio.features
from rasterio.crs import CRS
from rasterio.warp import Resampling, reproject, transform_bounds

from lcflow.common.raster import Grid
from lcflow.labels.nomenclature import CLC_NODATA_GRID, clc_legend

CLC_CRS = CRS.from_epsg(3035)
CLC_RES = 100.0


def clc_grid(tiles: list[Grid], margin: float = 500.0) -> Grid:
    """The 100 m EPSG:3035 grid, snapped to whole 100 m, covering every tile area."""
    bounds = [transform_bounds(g.crs, CLC_CRS, *g.bounds) for g in tiles]
    xmin = math.floor((min(b[0] for b in bounds) - margin) / CLC_RES) * CLC_RES
    ymin = math.floor((min(b[1] for b in bounds) - margin) / CLC_RES) * CLC_RES
    xmax = math.ceil((max(b[2] for b in bounds) + margin) / CLC_RES) * CLC_RES
    ymax = math.ceil((max(b[3] for b in bounds) + margin) / CLC_RES) * CLC_RES
    return Grid.from_bounds(CLC_CRS, (xmin, ymin, xmax, ymax), CLC_RES)


def generalise(truths: list[tuple[np.ndarray, Grid]], mmu_cells: int) -> tuple[np.ndarray, Grid]:
    """CLC grid codes on the 3035 grid from level-3 truth maps on their tile grids."""
    grid = clc_grid([g for _, g in truths])
    clc = np.zeros((grid.height, grid.width), dtype=np.uint16)
    for truth, g in truths:
        part = np.zeros_like(clc)
        reproject(
            truth.astype(np.uint16),
            part,
            src_transform=g.transform,
            src_crs=g.crs,
            src_nodata=0,
            dst_transform=grid.transform,
            dst_crs=grid.crs,
            dst_nodata=0,
            resampling=Resampling.mode,
        )
        # keep only cells mostly inside the tile area: mode over a partly covered cell is still a label
        clc = np.where(part > 0, part, clc)
    lut = {e.clc_code: e.grid_code for e in clc_legend()}
    grid_codes = np.full(clc.shape, CLC_NODATA_GRID, dtype=np.uint8)
    for code in np.unique(clc[clc > 0]):
        grid_codes[clc == code] = lut[int(code)]
    valid = grid_codes != CLC_NODATA_GRID
    if mmu_cells > 1:
        sieved = rasterio.features.sieve(grid_codes, size=mmu_cells, mask=valid, connectivity=8)
        grid_codes = np.where(valid, sieved, CLC_NODATA_GRID).astype(np.uint8)
    return grid_codes, grid
