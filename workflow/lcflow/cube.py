"""Build the per-tile, per-year data cube: cloud-masked, harmonised, composited onto a regular time grid.

Output ``cube.tif``: int16 reflectance x 10000, one band per (time step, band) named ``B04_t03``,
time-major, nodata -32768, with the time-step dates in its tags. ``cube_valid.tif``: per time step,
how many clear observations went into each composite pixel. The tile is processed window by window,
so a full 10980 x 10980 tile never has to fit in memory.
"""

import datetime as dt
import warnings
from pathlib import Path

import numpy as np
from odc.geo.geobox import GeoBox
from scipy import ndimage

from . import mgrs, sentinel2
from .errors import LcflowError
from .raster import Grid, cog_writer
from .search import read_manifest

NODATA = -32768


def time_grid(year: int, steps: int) -> tuple[list[dt.datetime], list[dt.date]]:
    """``steps`` equal windows over the calendar year: their ``steps + 1`` edges and centre dates."""
    start = dt.datetime(year, 1, 1)
    length = dt.datetime(year + 1, 1, 1) - start
    edges = [start + length * k / steps for k in range(steps + 1)]
    centres = [(edges[k] + (edges[k + 1] - edges[k]) / 2).date() for k in range(steps)]
    return edges, centres


def tile_grid(tile: str, items, resolution: float, bounds: list[float] | None) -> Grid:
    """The tile's grid in its UTM CRS: the configured area, or the extent of its 10 m assets."""
    epsg = mgrs.tile_epsg(tile)
    if bounds is None:
        key = sentinel2.asset_key(items[0].assets, "B02")
        asset = items[0].assets[key].extra_fields
        if "proj:transform" not in asset or "proj:shape" not in asset:
            raise LcflowError(f"tile {tile}: item {items[0].id} has no proj:transform/proj:shape; set aoi.{tile}")
        a, _, x0, _, e, y0 = asset["proj:transform"][:6]
        h, w = asset["proj:shape"]
        bounds = [x0, y0 + e * h, x0 + a * w, y0]
    item_epsg = sentinel2.item_epsg(items[0].properties)
    if item_epsg is not None and item_epsg != epsg:
        raise LcflowError(f"tile {tile}: items are in EPSG:{item_epsg}, the tile's zone is EPSG:{epsg}")
    return Grid.from_bounds(epsg, tuple(bounds), resolution)


def clear_mask(scl: np.ndarray, invalid: list[int], dilation_px: int) -> np.ndarray:
    """True where an observation (time, rows, cols) is usable: SCL not invalid, grown by ``dilation_px``."""
    bad = np.isin(scl, invalid)
    if dilation_px > 0:
        structure = np.zeros((3, 3, 3), dtype=bool)
        structure[1] = ndimage.generate_binary_structure(2, 1)
        bad = ndimage.binary_dilation(bad, structure=structure, iterations=dilation_px)
    return ~bad


def composite(values: np.ndarray, clear: np.ndarray, times: np.ndarray, edges: list[dt.datetime]):
    """Median of clear observations per time window.

    values (obs, bands, rows, cols) float with NaN for nodata; clear (obs, rows, cols).
    Returns (steps, bands, rows, cols) float with NaN where no clear observation, and counts (steps, rows, cols).
    """
    steps = len(edges) - 1
    n_obs, n_bands, h, w = values.shape
    out = np.full((steps, n_bands, h, w), np.nan, dtype=np.float32)
    counts = np.zeros((steps, h, w), dtype=np.uint8)
    masked = np.where(clear[:, None], values, np.nan)
    edge64 = np.array(edges, dtype="datetime64[us]")
    for k in range(steps):
        sel = (times >= edge64[k]) & (times < edge64[k + 1])
        if not sel.any():
            continue
        window = masked[sel]
        counts[k] = np.minimum(np.isfinite(window[:, 0]).sum(axis=0), 255)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out[k] = np.nanmedian(window, axis=0)
    return out, counts


def run(manifest: str | Path, tile: str, year: int, out_cube: str | Path, out_valid: str | Path, *,
        bands: list[str], resolution: float = 10.0, bounds: list[float] | None = None,
        invalid_scl: list[int] = list(sentinel2.DEFAULT_INVALID_SCL), dilation_px: int = 1,
        steps: int = 12, block: int = 512) -> Grid:
    """Composite the manifest's items of ``tile``/``year`` onto its grid; return the grid."""
    import odc.stac

    sentinel2.check_bands(bands)
    items = read_manifest(manifest)
    if not items:
        raise LcflowError(f"manifest {manifest} lists no items")
    grid = tile_grid(tile, items, resolution, bounds)
    keys = [sentinel2.asset_key(items[0].assets, b) for b in bands]
    scl_key = sentinel2.asset_key(items[0].assets, "SCL")
    by_time = sorted(items, key=lambda i: i.datetime)
    offsets = np.array([sentinel2.boa_offset(i.properties) for i in by_time], dtype=np.float32)
    edges, centres = time_grid(year, steps)
    names = [f"{b}_t{k:02d}" for k in range(steps) for b in bands]
    tags = {"tile": tile, "year": str(year), "bands": bands, "time_steps": [c.isoformat() for c in centres],
            "scale": "10000", "invalid_scl": invalid_scl}
    halo = dilation_px
    with cog_writer(out_cube, grid, steps * len(bands), "int16", nodata=NODATA, tags=tags,
                    descriptions=names, resampling="average") as cube, \
            cog_writer(out_valid, grid, steps, "uint8", tags={"time_steps": tags["time_steps"]},
                       descriptions=[f"valid_t{k:02d}" for k in range(steps)]) as valid:
        for win in grid.windows(block):
            r0, c0 = int(win.row_off) - halo, int(win.col_off) - halo
            h, w = int(win.height) + 2 * halo, int(win.width) + 2 * halo
            gb = GeoBox((h, w), grid.transform @ grid.transform.translation(c0, r0), grid.crs)
            ds = odc.stac.load(by_time, bands=keys + [scl_key], geobox=gb, groupby="id",
                               resampling={"*": "bilinear", scl_key: "nearest"}, preserve_original_order=True)
            times = ds.time.values.astype("datetime64[us]")
            if len(times) != len(by_time):
                raise LcflowError(f"{manifest}: {len(by_time)} items loaded as {len(times)} scenes")
            raw = np.stack([ds[k].values for k in keys], axis=1).astype(np.float32)  # (obs, bands, h, w)
            raw[raw == 0] = np.nan
            raw -= offsets[:, None, None, None]
            clear = clear_mask(ds[scl_key].values, invalid_scl, dilation_px) & np.isfinite(raw).all(axis=1)
            comp, counts = composite(raw, clear, times, edges)
            comp, counts = comp[..., halo:h - halo, halo:w - halo], counts[..., halo:h - halo, halo:w - halo]
            data = np.where(np.isfinite(comp), np.clip(np.round(comp), -32767, 32767), NODATA).astype(np.int16)
            cube.write(data.reshape(-1, *data.shape[2:]), window=win)
            valid.write(counts, window=win)
    return grid
