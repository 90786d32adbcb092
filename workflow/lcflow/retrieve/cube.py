"""Build the per-tile, per-year data cube: cloud-masked, harmonised, composited onto a regular time grid.

Output ``cube.tif``: a tiled GeoTIFF of int16 reflectance x 10000, one band per (time step, band)
named ``B04_t03``, time-major, nodata -32768, with the time-step dates in its tags. ``cube_valid.tif``:
per time step, how many clear observations went into each composite pixel. The tile is processed window by window,
so a full 10980 x 10980 tile never has to fit in memory.
"""

import contextlib
import dataclasses
import datetime as dt
import logging
import re
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from affine import Affine
from odc.geo.geobox import GeoBox

from lcflow.common import path_guard
from lcflow.common.atomic import publish_together
from lcflow.common.prefetch import prefetched, written_behind
from lcflow.common.progress import Progress
from lcflow.common.raster import Bands, Grid, staged_cog
from lcflow.errors import LcflowError
from lcflow.retrieve import indices, mgrs, remote, resample, sentinel2
from lcflow.retrieve.asset_reader import AssetReader, AssetReadError
from lcflow.retrieve.block_cache import (
    block_cache_bytes,
    block_cache_size,
    gdal_cache_bytes,
    window_bytes,
)
from lcflow.retrieve.composite import NODATA, clear_mask, composite, fill_time_gaps, to_int16
from lcflow.retrieve.cube_settings import CubeSettings
from lcflow.retrieve.read_failure import first_line, read_failure
from lcflow.retrieve.search import manifest_source, read_manifest

log = logging.getLogger("lcflow.retrieve.cube")


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
    outside = [item for item in items if sentinel2.utc(item.datetime).year != year]
    if outside:
        years = sorted({sentinel2.utc(item.datetime).year for item in outside})
        raise LcflowError(f"tile {tile} {year}: {len(outside)} of {len(items)} items of the manifest were acquired in "
                          f"{', '.join(map(str, years))}, not {year} (the first: {outside[0].id}): give the manifest "
                          f"of {year} (lcflow search --year {year})")
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


def local_assets(items) -> list[path_guard.Named]:
    """The assets of the items that are local files: inputs no output may overwrite."""
    found = []
    for item in items:
        for key, asset in item.assets.items():
            href = str(asset.href)
            path = href[len("file://"):] if href.startswith("file://") else href
            if not path_guard.is_remote(path):
                found.append(path_guard.Named(f"asset {key} of item {item.id}", path, path_guard.INPUT_FILE))
    return found


def native_grids(items, keys: list[str], grid: Grid) -> dict[str, Affine]:
    """Asset key -> its own pixel grid (transform), for the assets that every item stores on one north-up
    grid in the tile's CRS, as fine as ``grid`` or coarser: those are read as stored, from files kept
    open, and resampled by :mod:`lcflow.retrieve.resample`; the others are warped by odc-stac."""
    epsg = grid.crs.to_epsg()
    if any(sentinel2.item_epsg(i.properties) != epsg for i in items):
        return {}
    grids = {}
    for key in keys:
        found = {tuple(i.assets[key].extra_fields.get("proj:transform") or ())[:6] for i in items}
        if len(found) != 1 or len(t := found.pop()) != 6:
            continue
        transform = Affine(*t)
        if transform.b == 0 and transform.d == 0 and transform.e < 0 and transform.a > grid.transform.a * 0.999:
            grids[key] = transform
    return grids


def _resampling(transform: Affine, grid: Grid, categorical: bool) -> str:
    """Nearest for classes and for a band on the grid's own pixel size (there: the pixels as stored,
    where the grids are aligned), bilinear for a coarser band."""
    return "nearest" if categorical or abs(transform.a - grid.transform.a) < 1e-6 * grid.transform.a else "bilinear"


def _resampled(values: np.ndarray, src: Affine, method: str, target: GeoBox) -> np.ndarray:
    """(rows, cols) read on the grid ``src`` resampled onto ``target``."""
    if method == "nearest":
        return resample.nearest(values, src, target.transform, target.shape.yx)
    return resample.bilinear(values, src, target.transform, target.shape.yx, nodata=0)


def _halo_geobox(grid: Grid, win, halo: int) -> GeoBox:
    """The pixel grid of ``win`` grown by ``halo`` pixels on every side."""
    r0, c0 = int(win.row_off) - halo, int(win.col_off) - halo
    shape = (int(win.height) + 2 * halo, int(win.width) + 2 * halo)
    return GeoBox(shape, grid.transform @ grid.transform.translation(c0, r0), grid.crs)


def run(manifest: str | Path, tile: str, year: int, out_cube: str | Path, out_valid: str | Path,
        settings: CubeSettings | None = None, *, bounds: list[float] | None = None,
        network: remote.Network | None = None) -> Grid:
    """Composite the manifest's items of ``tile``/``year`` onto its grid; return the grid.

    Refused, with nothing written, when fewer than ``settings.min_clear_fraction`` of the composite cells
    (pixel x time step) hold a clear observation: the year is all cloud, or the area has no data. The next
    window is read while one is composited and the previous one written; memory holds two windows of every
    date and one window of the cube, plus GDAL's block cache, sized to hold a decoded block of every asset of
    every scene (at most ``settings.cache_mb``, at least the process's cache): it grows with
    ``settings.block_px`` and the number of scenes, not with the tile.

    Args:
        manifest: the tile-year's items (``lcflow search``'s or ``lcflow stage``'s ItemCollection).
        tile: the MGRS tile, whose UTM zone is the cube's CRS.
        year: the calendar year of the time grid.
        out_cube: the cube to write: every time step's bands, then its spectral indices, int16 reflectance x 10000.
        out_valid: the count of clear observations of each pixel and time step.
        settings: the ``cube`` section (bands, grid, time steps, cloud mask, windows); None: the defaults.
        bounds: xmin, ymin, xmax, ymax in the tile's CRS (None: the whole tile).
        network: how remote scenes are read: GDAL's timeouts and retries, the signing of their URLs.
    """
    import rasterio
    from rasterio.errors import NotGeoreferencedWarning

    # odc-stac warps SCL (and bands without their own grid) into bare arrays, always with an explicit
    # target transform; rasterio still says those arrays have none
    warnings.filterwarnings("ignore", category=NotGeoreferencedWarning, module="rasterio.warp")
    settings = settings or CubeSettings()
    bands = list(settings.bands)  # checked when the settings were made (CubeSettings)
    spectral_indices = indices.check(list(settings.indices), bands)
    steps, fill_gaps = settings.time_steps, settings.fill_gaps == "linear"
    scenes = _checked_scenes(manifest, tile, year, (out_cube, out_valid), settings, bounds, network)
    grid = scenes.grid
    edges, centres = time_grid(year, steps)
    layers = [*bands, *spectral_indices]
    tags = {"tile": tile, "year": str(year), "bands": layers, "indices": spectral_indices,
            "time_steps": [c.isoformat() for c in centres], "scale": "10000",
            "invalid_scl": list(settings.invalid_scl),
            "gaps": "linear in time" if fill_gaps else "none"}
    # Morton order: the windows inside one tile of a source file follow each other, and find its
    # decompressed pixels in GDAL's block cache (the files stay open)
    windows = list(grid.windows(settings.block_px, order="z"))
    progress = Progress(log, f"cube {tile} {year}", grid.width * grid.height)
    clear_cells = 0
    with staged_cog(out_cube, grid, Bands(steps * len(layers), "int16", NODATA,
                                          [f"{b}_t{k:02d}" for k in range(steps) for b in layers]),
                    tags=tags, resampling="average") as staged_cube, \
            staged_cog(out_valid, grid, Bands(steps, "uint8", None, [f"valid_t{k:02d}" for k in range(steps)]),
                       tags={"time_steps": tags["time_steps"]}) as staged_valid, \
            scenes.reading() as load:
        cube, valid = staged_cube.dataset, staged_valid.dataset

        def write_window(win, stored: np.ndarray, counts: np.ndarray) -> None:
            """Compressing a window's 120-odd int16 bands costs as much as computing them: done meanwhile."""
            cube.write(stored, window=win)
            valid.write(counts, window=win)
            progress.add(1, len(windows), int(win.width * win.height))

        cache = scenes.cache_size(len(layers))
        with rasterio.Env(GDAL_CACHEMAX=cache), written_behind() as write:  # every window written on leaving
            stored = not fill_gaps and not spectral_indices  # int16 straight from the medians: nothing follows
            for win, loaded in prefetched(load, windows, stop=scenes.stopping):
                comp, counts = scenes.composite(loaded, edges, stored)
                clear_cells += int((counts > 0).sum())
                write(write_window, win, _as_stored(comp, fill_gaps, spectral_indices, bands), counts)
                del comp, counts, loaded
        _check_clear_share(clear_cells / (steps * grid.width * grid.height), settings.min_clear_fraction, tile, year)
        # tiled GeoTIFFs (256 px tiles, band-interleaved: see raster.STAGING_INTERLEAVE) as written: a COG's
        # overviews of 120 bands would cost a second pass over the largest file of the workflow
        publish_together([(staged_valid.finish(cog=False), staged_valid.final),
                          (staged_cube.finish(cog=False), staged_cube.final)])
    return grid


def _checked_scenes(manifest: str | Path, tile: str, year: int, outs: tuple[str | Path, str | Path],
                    settings: CubeSettings, bounds: list[float] | None, network: remote.Network | None) -> "_Scenes":
    """The tile-year's scenes on the cube's grid, once its items, their assets and where they are read
    from are checked, before anything is written (``outs``: the cube and its valid counts)."""
    items = read_manifest(manifest)
    if not items:
        raise LcflowError(f"manifest {manifest} lists no items")
    path_guard.check([path_guard.Named("--out", str(outs[0]), path_guard.OUTPUT_FILE),
                      path_guard.Named("--valid", str(outs[1]), path_guard.OUTPUT_FILE),
                      *local_assets(items)])
    grid = tile_grid(tile, items, settings.resolution, bounds)
    keys, scl_key = check_items(items, tile, year, list(settings.bands))
    remote.check_credentials_reach(((f"item {i.id} asset {k}", i.assets[k].href) for i in items for k in [*keys, scl_key]),
                                   manifest_source(manifest))
    return _Scenes(manifest, items, tile, year, grid, (keys, scl_key), settings, network)


def _as_stored(comp: np.ndarray, fill_gaps: bool, spectral_indices: list[str], bands: list[str]) -> np.ndarray:
    """A window's composites (steps, bands, rows, cols) as the cube stores them: gaps filled and indices
    added where asked, int16 (already so where nothing followed the medians), the bands of each step in turn."""
    if comp.dtype != np.int16:
        if fill_gaps:
            comp = fill_time_gaps(comp)
        if spectral_indices:
            comp = np.concatenate([comp, indices.compute(spectral_indices, comp, bands, sentinel2.QUANTIFICATION)], axis=1)
        comp = to_int16(comp)
    return comp.reshape(-1, *comp.shape[2:])


def _check_clear_share(share: float, min_clear_fraction: float, tile: str, year: int) -> None:
    log.info("tile %s %s: %.1f %% of the composite cells hold a clear observation", tile, year, 100 * share)
    if share < min_clear_fraction:
        raise LcflowError(f"tile {tile} {year}: only {100 * share:.1f} % of the composite cells (pixel x time step) "
                          f"hold a clear observation, under the floor of {100 * min_clear_fraction:g} % "
                          "(cube.min_clear_fraction): the year is cloud-covered or the area has no data")
    if share < 2 * min_clear_fraction:
        log.warning("tile %s %s: only %.1f %% of the composite cells hold a clear observation", tile, year, 100 * share)


class _Scenes:
    """The scenes of a tile-year as the cube reads them: each window of every scene's assets on the cube's
    grid, read by a pool of threads (each with the network's GDAL settings), assets on their own grid in the
    tile's CRS read as stored and resampled here, the others warped by odc-stac; then composited."""

    def __init__(self, manifest, items, tile: str, year: int, grid: Grid, assets: tuple[list[str], str],
                 settings: CubeSettings, network: remote.Network | None):
        self.manifest, self.tile, self.year, self.grid, self.settings = manifest, tile, year, grid, settings
        keys, scl_key = assets
        self.keys, self.scl_key = keys, scl_key
        network = network or remote.Network()
        self.sign = remote.signer(network.signing, items)
        if network.s3_endpoint is None:
            network = dataclasses.replace(network, s3_endpoint=remote.s3_endpoint(items))
        self.network, self.options = network, network.gdal_options()
        self.by_time = sorted(items, key=lambda i: i.datetime)
        self.offsets = np.array([sentinel2.boa_offset(i.properties, i.id) for i in self.by_time], dtype=np.float32)
        self.times = np.array([np.datetime64(sentinel2.utc(i.datetime), "us") for i in self.by_time])
        # Sentinel-2 L2A as every catalogue serves it: DNs in uint16, SCL in uint8, 0 = no data (declared, so
        # that resampling leaves no-data out and the load stays in the compact type)
        self.stac_cfg = {"assets": {**{k: {"data_type": "uint16", "nodata": 0, "unit": "1"} for k in keys},
                                    scl_key: {"data_type": "uint8", "nodata": 0, "unit": "1"}}}
        # assets on their own grid in the tile's CRS (every real catalogue's): read as stored, resampled here
        self.native = {k: (t, _resampling(t, grid, k == scl_key))
                       for k, t in native_grids(self.by_time, [*keys, scl_key], grid).items()}
        self.shapes = {i.assets[k].href: tuple(i.assets[k].extra_fields["proj:shape"])[:2] for i in self.by_time
                       for k in self.native if len(i.assets[k].extra_fields.get("proj:shape") or ()) == 2}
        self.warped = [k for k in keys if k not in self.native]
        self._thread = threading.local()
        self.reader = self.readers = None
        self.stopping = threading.Event()  # set when the windows' consumer has left: reads not begun are skipped
        if any(method == "bilinear" for _, method in self.native.values()):
            resample.compiled()  # here, where SIGTERM can interrupt it, not in a reading thread the exit waits for

    @contextlib.contextmanager
    def reading(self):
        """The asset reader and its threads, open for the block; yields :meth:`load`."""
        with AssetReader(self.sign, shapes=self.shapes) as reader, ThreadPoolExecutor(
                self.settings.read_threads, thread_name_prefix="lcflow-asset", initializer=self._take_settings) as readers:
            self.reader, self.readers = reader, readers
            try:
                yield self.load
            finally:
                self.reader = self.readers = None

    def _take_settings(self) -> None:
        """A reading thread takes the network's GDAL settings once, for its whole life (they are per
        thread): entering rasterio's Env for every asset read costs about half a millisecond of CPU."""
        import rasterio

        self._thread.env = rasterio.Env(**self.options)
        self._thread.env.__enter__()

    def on_asset(self, item, key: str, action, *args):
        """``action(href, *args)`` of one asset, under the network settings; its failure names it."""
        import rasterio

        taken = getattr(self._thread, "env", None) is not None
        with contextlib.nullcontext() if taken else rasterio.Env(**self.options):
            try:
                return action(item.assets[key].href, *args)
            except (AssetReadError, LcflowError) as exc:  # GDAL, HTTP or decoding errors of one asset: name it
                said = first_line(str(exc))
                if re.search(r"\b(HTTP response code|answers HTTP): 40[13]\b|\bHTTP 40[13]\b", said):
                    said += ("; the server wants credentials: give them for its host in ~/.netrc (or as "
                             "GDAL_HTTP_USERPWD or GDAL_HTTP_HEADERS where every asset is on the catalogue's host)")
                raise LcflowError(f"tile {self.tile} {self.year}: reading item {item.id} asset {key} "
                                  f"({remote.redact(item.assets[key].href)}) failed: {said}") from exc

    def _read_asset(self, item, key: str, method: str, src: Affine, shape: tuple[int, int], target: GeoBox,
                    out: np.ndarray) -> None:
        """One scene's asset read on its own grid (``src``, ``shape``) and resampled onto ``target`` into
        ``out``, in a reading thread: the reading threads resample while the main one composites."""
        if self.stopping.is_set():
            return
        if method == "nearest" and src.almost_equals(target.transform) and shape == target.shape.yx:
            self.on_asset(item, key, self.reader.read, src, shape, out)  # the pixels as stored
            return
        stored = self.on_asset(item, key, self.reader.read, src, shape, np.empty(shape, out.dtype))
        out[...] = _resampled(stored, src, method, target)

    def load(self, win) -> dict[str, np.ndarray]:
        """One window of every scene: DNs per asset on the cube's grid. The scene classification comes
        grown by the mask's halo (only SCL: a halo on every band would decompress the neighbouring tiles
        of every file again)."""
        grown, exact = _halo_geobox(self.grid, win, self.settings.dilation_px), _halo_geobox(self.grid, win, 0)
        values: dict[str, np.ndarray] = {}
        jobs = []
        for key, (transform, method) in self.native.items():
            target = grown if key == self.scl_key else exact
            src, shape = resample.source_window(transform, target.transform, target.shape.yx, method)
            values[key] = np.empty((len(self.by_time), *target.shape.yx),
                                   dtype=np.uint8 if key == self.scl_key else np.uint16)
            jobs += [(item, key, method, src, shape, target, values[key][i]) for i, item in enumerate(self.by_time)]
        list(self.readers.map(lambda job: self._read_asset(*job), jobs))
        if self.warped or self.scl_key not in self.native:
            values.update(self._warped(grown, exact))
        return values

    def _warped(self, grown: GeoBox, exact: GeoBox) -> dict[str, np.ndarray]:
        """The assets not on their own grid in the tile's CRS, warped by odc-stac."""
        import odc.stac

        values = {}
        with remote.gdal_env(self.network):  # in the reading thread: GDAL's settings are per thread
            try:
                common = dict(groupby="id", stac_cfg=self.stac_cfg, preserve_original_order=True,
                              pool=self.settings.read_threads, patch_url=self.sign)
                loads = [([self.scl_key], grown, "nearest")] if self.scl_key not in self.native else []
                loads += [(self.warped, exact, "bilinear")] if self.warped else []
                for group, geobox, method in loads:
                    ds = odc.stac.load(self.by_time, bands=group, geobox=geobox, resampling=method, **common)
                    if len(ds.time) != len(self.by_time):
                        raise LcflowError(f"{self.manifest}: {len(self.by_time)} items loaded as {len(ds.time)} scenes")
                    values.update((k, ds[k].values) for k in group)
            except LcflowError:
                raise
            except Exception as exc:  # GDAL, HTTP or decoding errors of one asset: name it
                raise read_failure(exc, self.by_time, self.keys + [self.scl_key], self.tile, self.year, grown,
                                    self.sign) from exc
        return values

    def cache_size(self, layers: int) -> int:
        """GDAL's block cache for the cube: a decoded block of every asset of every scene, so that z-order
        windows decode each block once (a smaller cache decodes a block again for each window inside it)."""
        cache = gdal_cache_bytes()
        if not self.native:
            return cache
        per_scene = sum(self.on_asset(self.by_time[0], k, self.reader.block_bytes) for k in self.native)
        cube = self.settings
        need = block_cache_bytes(per_scene, len(self.by_time), window_bytes(cube.block_px, cube.time_steps, layers))
        cache = block_cache_size(need, cube.cache_mb)
        log.info("tile %s %s: GDAL block cache %d MB for the blocks of %d scenes (%d MB needed)", self.tile, self.year,
                 cache // 2**20, len(self.by_time), need // 2**20)
        if need > cache:
            log.warning("tile %s %s: the source blocks of %d scenes need %d MB of block cache, more than "
                        "cube.cache_mb (%d MB): blocks will be decoded more than once", self.tile, self.year,
                        len(self.by_time), need // 2**20, cube.cache_mb)
        return cache

    def composite(self, loaded: dict[str, np.ndarray], edges, stored: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """A window's composites (float32, or ``stored`` as int16) and clear-observation counts per time
        step, from its loaded scenes (SCL read ``dilation_px`` wider on every side)."""
        px = self.settings.dilation_px
        scl = loaded.pop(self.scl_key)
        values = [loaded.pop(k) for k in self.keys]
        clear = clear_mask(scl, list(self.settings.invalid_scl), px)[:, px:scl.shape[1] - px, px:scl.shape[2] - px]
        for dn in values:
            clear &= dn != 0
        return composite(values, clear, self.times, edges, self.offsets, stored)
