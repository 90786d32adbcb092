"""Build the per-tile, per-year data cube: cloud-masked, harmonised, composited onto a regular time grid.

Output ``cube.tif``: a tiled GeoTIFF of int16 reflectance x 10000, one band per (time step, band)
named ``B04_t03``, time-major, nodata -32768, with the time-step dates in its tags. ``cube_valid.tif``:
per time step, how many clear observations went into each composite pixel. The tile is processed window by window,
so a full 10980 x 10980 tile never has to fit in memory.
"""

import dataclasses
import datetime as dt
import logging
from pathlib import Path

import numpy as np
from odc.geo.geobox import GeoBox
from scipy import ndimage

from . import mgrs, remote, sentinel2
from .atomic import publish_together
from .errors import LcflowError
from .progress import Progress
from .raster import Grid, staged_cog
from .search import read_manifest

NODATA = -32768
log = logging.getLogger("lcflow.cube")


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
        key = sentinel2.asset_key(items[0].assets, "B02", items[0].id)
        asset = items[0].assets[key].extra_fields
        if "proj:transform" not in asset or "proj:shape" not in asset:
            raise LcflowError(f"tile {tile}: item {items[0].id} has no proj:transform/proj:shape; set aoi.{tile}")
        a, _, x0, _, e, y0 = asset["proj:transform"][:6]
        h, w = asset["proj:shape"]
        bounds = [x0, y0 + e * h, x0 + a * w, y0]
    else:
        mgrs.check_inside_tile(tile, bounds)
    return Grid.from_bounds(epsg, tuple(bounds), resolution)


def check_items(items, tile: str, year: int, bands: list[str]) -> tuple[list[str], str]:
    """Every item has every band and SCL under the same asset keys, in the tile's CRS; return the keys.

    Checked for all items before any pixel is read: an item that odc-stac would otherwise drop or
    misplace stops the job, named.
    """
    epsg = mgrs.tile_epsg(tile)
    first = items[0]
    keys = [sentinel2.asset_key(first.assets, b, first.id) for b in bands]
    scl_key = sentinel2.asset_key(first.assets, "SCL", first.id)
    for item in items:
        for band, key in zip([*bands, "SCL"], [*keys, scl_key]):
            if key not in item.assets:
                raise LcflowError(f"tile {tile} {year}: item {item.id} has no {key!r} asset (band {band}); "
                                  f"it has {', '.join(sorted(item.assets)) or 'none'}")
        item_epsg = sentinel2.item_epsg(item.properties)
        if item_epsg is not None and item_epsg != epsg:
            raise LcflowError(f"tile {tile} {year}: item {item.id} is in EPSG:{item_epsg}, the tile's zone is "
                              f"EPSG:{epsg}")
    return keys, scl_key


def _read_failure(exc: Exception, items, keys: list[str], tile: str, year: int, window: GeoBox,
                  sign=None) -> LcflowError:
    """One line naming the item and asset whose read failed (URLs without credentials or query strings:
    no signatures, no tokens).

    odc-stac's exception does not say which file failed, so each asset's part of the window is read
    again, one by one, until one fails.
    """
    failed = _failing_asset(items, keys, window, sign)
    if failed is None:
        return LcflowError(f"tile {tile} {year}: reading the scenes failed ({type(exc).__name__}: "
                           f"{_first_line(str(exc))})")
    item, key, error = failed
    return LcflowError(f"tile {tile} {year}: reading item {item.id} asset {key} ({remote.redact(item.assets[key].href)}) "
                       f"failed: {_first_line(_root_cause(error))}")


def _root_cause(error: BaseException) -> str:
    """GDAL's own words: rasterio's 'Read failed. See previous exception' wraps them as causes."""
    while (error.__cause__ or error.__context__) is not None:
        error = error.__cause__ or error.__context__
    return str(error)


def _failing_asset(items, keys: list[str], window: GeoBox, sign=None):
    """(item, asset key, error) of the first asset whose pixels in ``window`` cannot be read, or None."""
    import rasterio
    from rasterio.warp import transform_bounds
    from rasterio.windows import from_bounds

    bounds = window.boundingbox
    for item in items:
        for key in keys:
            href = item.assets[key].href
            try:
                with rasterio.open(sign(href) if sign else href) as src:
                    left, bottom, right, top = transform_bounds(window.crs.to_wkt(), src.crs, *bounds)
                    win = from_bounds(left, bottom, right, top, src.transform).round_offsets().round_lengths()
                    src.read(1, window=win, boundless=True)
            except Exception as error:  # the same errors odc-stac met, now with their file
                return item, key, error
    return None


def _first_line(text: str) -> str:
    return remote.redact((text.strip().splitlines() or [""])[0])[:300]


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
    edge64 = np.array(edges, dtype="datetime64[us]")
    for k in range(steps):
        sel = (times >= edge64[k]) & (times < edge64[k + 1])
        if not sel.any():
            continue
        window = np.where(clear[sel, None], values[sel], np.nan)  # one step's copy at a time, not the year's
        counts[k] = np.minimum(np.isfinite(window[:, 0]).sum(axis=0), 255)
        out[k] = nan_median(window)
    return out, counts


def nan_median(values: np.ndarray) -> np.ndarray:
    """Median over axis 0 of the finite values, NaN where there is none: ``np.nanmedian``'s result,
    many times faster on the short axis of a composite (nanmedian goes pixel by pixel there).

    Sorting puts NaN last, so the median of a pixel's n finite values sits at (n - 1) // 2 and n // 2.
    """
    n = np.isfinite(values).sum(axis=0)
    ordered = np.sort(values, axis=0)
    low = np.take_along_axis(ordered, (np.maximum(n, 1) - 1)[None] // 2, axis=0)[0]
    high = np.take_along_axis(ordered, (n // 2)[None], axis=0)[0]
    return np.where(n > 0, (low + high) / 2, np.nan).astype(values.dtype)


def run(manifest: str | Path, tile: str, year: int, out_cube: str | Path, out_valid: str | Path, *,
        bands: list[str], resolution: float = 10.0, bounds: list[float] | None = None,
        invalid_scl: list[int] = list(sentinel2.DEFAULT_INVALID_SCL), dilation_px: int = 1,
        steps: int = 12, block: int = 512, min_clear_fraction: float = 0.1,
        network: remote.Network | None = None, signing: str = "auto") -> Grid:
    """Composite the manifest's items of ``tile``/``year`` onto its grid; return the grid.

    Refused, with nothing written, when fewer than ``min_clear_fraction`` of the composite cells
    (pixel x time step) hold a clear observation: the year is all cloud, or the area has no data.
    Scenes are read through ``network``'s GDAL settings, ``network.threads`` files at a time, their
    URLs signed as they are read where ``signing`` (or, for ``auto``, the catalogue) asks for it.
    Memory holds one window of every date: it grows with ``block`` and the number of scenes, not with
    the tile.
    """
    import odc.stac

    sentinel2.check_bands(bands)
    items = read_manifest(manifest)
    if not items:
        raise LcflowError(f"manifest {manifest} lists no items")
    grid = tile_grid(tile, items, resolution, bounds)
    keys, scl_key = check_items(items, tile, year, bands)
    sign = remote.signer(signing, items)
    network = network or remote.Network()
    if network.s3_endpoint is None:
        network = dataclasses.replace(network, s3_endpoint=remote.s3_endpoint(items))
    by_time = sorted(items, key=lambda i: i.datetime)
    offsets = np.array([sentinel2.boa_offset(i.properties) for i in by_time], dtype=np.float32)
    edges, centres = time_grid(year, steps)
    names = [f"{b}_t{k:02d}" for k in range(steps) for b in bands]
    tags = {"tile": tile, "year": str(year), "bands": bands, "time_steps": [c.isoformat() for c in centres],
            "scale": "10000", "invalid_scl": invalid_scl}
    halo = dilation_px
    windows = list(grid.windows(block))
    progress = Progress(log, f"cube {tile} {year}", grid.width * grid.height)
    clear_cells = 0
    with remote.gdal_env(network), \
            staged_cog(out_cube, grid, steps * len(bands), "int16", nodata=NODATA, tags=tags,
                       descriptions=names, resampling="average") as staged_cube, \
            staged_cog(out_valid, grid, steps, "uint8", tags={"time_steps": tags["time_steps"]},
                       descriptions=[f"valid_t{k:02d}" for k in range(steps)]) as staged_valid:
        cube, valid = staged_cube.dataset, staged_valid.dataset
        for win in windows:
            r0, c0 = int(win.row_off) - halo, int(win.col_off) - halo
            h, w = int(win.height) + 2 * halo, int(win.width) + 2 * halo
            gb = GeoBox((h, w), grid.transform @ grid.transform.translation(c0, r0), grid.crs)
            try:
                ds = odc.stac.load(by_time, bands=keys + [scl_key], geobox=gb, groupby="id",
                                   resampling={"*": "bilinear", scl_key: "nearest"}, preserve_original_order=True,
                                   pool=network.threads, patch_url=sign)
                times = ds.time.values.astype("datetime64[us]")
                raw = np.empty((len(times), len(keys), h, w), dtype=np.float32)  # (obs, bands, h, w)
                for i, k in enumerate(keys):
                    raw[:, i] = ds[k].values
                scl = ds[scl_key].values
                del ds
            except Exception as exc:  # GDAL, HTTP or decoding errors of one asset: name it
                raise _read_failure(exc, by_time, keys + [scl_key], tile, year, gb, sign) from exc
            if len(times) != len(by_time):
                raise LcflowError(f"{manifest}: {len(by_time)} items loaded as {len(times)} scenes")
            raw[raw == 0] = np.nan
            raw -= offsets[:, None, None, None]
            clear = clear_mask(scl, invalid_scl, dilation_px) & np.isfinite(raw).all(axis=1)
            comp, counts = composite(raw, clear, times, edges)
            comp, counts = comp[..., halo:h - halo, halo:w - halo], counts[..., halo:h - halo, halo:w - halo]
            clear_cells += int((counts > 0).sum())
            data = np.where(np.isfinite(comp), np.clip(np.round(comp), -32767, 32767), NODATA).astype(np.int16)
            cube.write(data.reshape(-1, *data.shape[2:]), window=win)
            valid.write(counts, window=win)
            progress.add(1, len(windows), int(win.width * win.height))
        share = clear_cells / (steps * grid.width * grid.height)
        log.info("tile %s %s: %.1f %% of the composite cells hold a clear observation", tile, year, 100 * share)
        if share < min_clear_fraction:
            raise LcflowError(f"tile {tile} {year}: only {100 * share:.1f} % of the composite cells (pixel x time step) "
                              f"hold a clear observation, under the floor of {100 * min_clear_fraction:g} % "
                              "(cube.min_clear_fraction): the year is cloud-covered or the area has no data")
        if share < 2 * min_clear_fraction:
            log.warning("tile %s %s: only %.1f %% of the composite cells hold a clear observation", tile, year, 100 * share)
        # tiled GeoTIFFs (256 px tiles, pixel-interleaved: a pixel's series in one read) as written: a COG's
        # overviews of 120 bands would cost a second pass over the largest file of the workflow
        publish_together([(staged_valid.finish(cog=False), staged_valid.final),
                          (staged_cube.finish(cog=False), staged_cube.final)])
    return grid
