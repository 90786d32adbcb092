"""A small cube repeated to a large one, written as the cube stage writes it (for the prediction benchmarks)."""

import json
from pathlib import Path

import numpy as np
import rasterio

from lcflow.common.raster import Grid, staged_cog
from lcflow.retrieve.composite import NODATA


def tiled_cube(small: Path, size: int, out: Path) -> None:
    """The small cube repeated to ``size`` x ``size`` px, written window by window as the cube stage does
    (tiled 256 px, ZSTD, band-interleaved), so that only one window is ever in memory."""
    with rasterio.open(small) as src:
        data, names, raw_tags = src.read(), list(src.descriptions), src.tags()
    g = Grid.of(small)
    tags = {k: json.loads(v) if k in ("bands", "time_steps", "invalid_scl") else v
            for k, v in raw_tags.items() if k != "AREA_OR_POINT"}
    grid = Grid(g.crs, g.transform, size, size)
    n = data.shape[1]
    with staged_cog(out, grid, data.shape[0], "int16", nodata=NODATA, tags=tags, descriptions=names) as staged:
        for win in grid.windows(1024):
            rows = (np.arange(win.row_off, win.row_off + win.height) % n)[:, None]
            cols = (np.arange(win.col_off, win.col_off + win.width) % n)[None, :]
            staged.dataset.write(data[:, rows, cols], window=win)
        stage = staged.finish(cog=False)
        stage.rename(out)
