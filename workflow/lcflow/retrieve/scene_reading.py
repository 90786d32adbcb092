"""The scenes of a tile-year as a cube reads them: each window of every scene's assets on the cube's grid,
read by a pool of threads, assets stored on their own grid in the tile's CRS read as stored and resampled
here (:mod:`lcflow.retrieve.resample`), the others warped by odc-stac; then composited
(:mod:`lcflow.retrieve.composite`)."""

import contextlib
import dataclasses
import logging
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from affine import Affine
from odc.geo.geobox import GeoBox

from lcflow.common.raster import Grid
from lcflow.errors import LcflowError
from lcflow.retrieve import remote, resample, sentinel2
from lcflow.retrieve.asset_reader import AssetReader, AssetReadError
from lcflow.retrieve.block_cache import (
    block_cache_bytes,
    block_cache_size,
    gdal_cache_bytes,
    window_bytes,
)
from lcflow.retrieve.composite import clear_mask, composite
from lcflow.retrieve.cube_settings import CubeSettings
from lcflow.retrieve.read_failure import first_line, read_failure

log = logging.getLogger("lcflow.retrieve.cube")


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
        if (
            transform.b == 0
            and transform.d == 0
            and transform.e < 0
            and transform.a > grid.transform.a * 0.999
        ):
            grids[key] = transform
    return grids


def resampling_method(transform: Affine, grid: Grid, categorical: bool) -> str:
    """Nearest for classes and for a band on the grid's own pixel size (there: the pixels as stored,
    where the grids are aligned), bilinear for a coarser band."""
    return (
        "nearest"
        if categorical or abs(transform.a - grid.transform.a) < 1e-6 * grid.transform.a
        else "bilinear"
    )


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


class Scenes:
    """The scenes of a tile-year as the cube reads them: each window of every scene's assets on the cube's
    grid, read by a pool of threads (each with the network's GDAL settings), assets on their own grid in the
    tile's CRS read as stored and resampled here, the others warped by odc-stac; then composited."""

    def __init__(
        self,
        manifest,
        items,
        tile: str,
        year: int,
        grid: Grid,
        assets: tuple[list[str], str],
        settings: CubeSettings,
        network: remote.Network | None,
    ):
        self.manifest, self.tile, self.year, self.grid, self.settings = (
            manifest,
            tile,
            year,
            grid,
            settings,
        )
        keys, scl_key = assets
        self.keys, self.scl_key = keys, scl_key
        network = network or remote.Network()
        self.sign = remote.signer(network.signing, items)
        if network.s3_endpoint is None:
            network = dataclasses.replace(network, s3_endpoint=remote.s3_endpoint(items))
        self.network, self.options = network, network.gdal_options()
        self.by_time = sorted(items, key=lambda i: i.datetime)
        self.offsets = np.array(
            [sentinel2.boa_offset(i.properties, i.id) for i in self.by_time], dtype=np.float32
        )
        self.times = np.array(
            [np.datetime64(sentinel2.utc(i.datetime), "us") for i in self.by_time]
        )
        # Sentinel-2 L2A as every catalogue serves it: DNs in uint16, SCL in uint8, 0 = no data (declared, so
        # that resampling leaves no-data out and the load stays in the compact type)
        self.stac_cfg = {
            "assets": {
                **{k: {"data_type": "uint16", "nodata": 0, "unit": "1"} for k in keys},
                scl_key: {"data_type": "uint8", "nodata": 0, "unit": "1"},
            }
        }
        # assets on their own grid in the tile's CRS (every real catalogue's): read as stored, resampled here
        self.native = {
            k: (t, resampling_method(t, grid, k == scl_key))
            for k, t in native_grids(self.by_time, [*keys, scl_key], grid).items()
        }
        self.shapes = {
            i.assets[k].href: tuple(i.assets[k].extra_fields["proj:shape"])[:2]
            for i in self.by_time
            for k in self.native
            if len(i.assets[k].extra_fields.get("proj:shape") or ()) == 2
        }
        self.warped = [k for k in keys if k not in self.native]
        self._thread = threading.local()
        self._reading: tuple[AssetReader, ThreadPoolExecutor] | None = None  # while reading()
        # set when the windows' consumer has left: reads not begun are skipped
        self.stopping = threading.Event()
        if any(method == "bilinear" for _, method in self.native.values()):
            resample.compiled()  # here, where SIGTERM can interrupt it, not in a reading thread the exit waits for

    @contextlib.contextmanager
    def reading(self):
        """The asset reader and its threads, open for the block; yields :meth:`load`."""
        with (
            AssetReader(self.sign, shapes=self.shapes) as reader,
            ThreadPoolExecutor(
                self.settings.read_threads,
                thread_name_prefix="lcflow-asset",
                initializer=self._take_settings,
            ) as readers,
        ):
            self._reading = reader, readers
            try:
                yield self.load
            finally:
                self._reading = None

    def _open(self) -> tuple[AssetReader, ThreadPoolExecutor]:
        """The asset reader and its threads, which :meth:`reading` opens."""
        if self._reading is None:
            raise RuntimeError("scenes are read inside Scenes.reading()")
        return self._reading

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
            except (
                AssetReadError,
                LcflowError,
            ) as exc:  # GDAL, HTTP or decoding errors of one asset: name it
                said = first_line(str(exc))
                if re.search(
                    r"\b(HTTP response code|answers HTTP): 40[13]\b|\bHTTP 40[13]\b", said
                ):
                    said += (
                        "; the server wants credentials: give them for its host in ~/.netrc (or as "
                        "GDAL_HTTP_USERPWD or GDAL_HTTP_HEADERS where every asset is on the catalogue's host)"
                    )
                raise LcflowError(
                    f"tile {self.tile} {self.year}: reading item {item.id} asset {key} "
                    f"({remote.redact(item.assets[key].href)}) failed: {said}"
                ) from exc

    def _read_asset(
        self,
        item,
        key: str,
        method: str,
        src: Affine,
        shape: tuple[int, int],
        target: GeoBox,
        out: np.ndarray,
    ) -> None:
        """One scene's asset read on its own grid (``src``, ``shape``) and resampled onto ``target`` into
        ``out``, in a reading thread: the reading threads resample while the main one composites."""
        if self.stopping.is_set():
            return
        if method == "nearest" and src.almost_equals(target.transform) and shape == target.shape.yx:
            self.on_asset(item, key, self._open()[0].read, src, shape, out)  # the pixels as stored
            return
        stored = self.on_asset(
            item, key, self._open()[0].read, src, shape, np.empty(shape, out.dtype)
        )
        out[...] = _resampled(stored, src, method, target)

    def load(self, win) -> dict[str, np.ndarray]:
        """One window of every scene: DNs per asset on the cube's grid. The scene classification comes
        grown by the mask's halo (only SCL: a halo on every band would decompress the neighbouring tiles
        of every file again)."""
        grown, exact = (
            _halo_geobox(self.grid, win, self.settings.dilation_px),
            _halo_geobox(self.grid, win, 0),
        )
        values: dict[str, np.ndarray] = {}
        jobs = []
        for key, (transform, method) in self.native.items():
            target = grown if key == self.scl_key else exact
            src, shape = resample.source_window(
                transform, target.transform, target.shape.yx, method
            )
            values[key] = np.empty(
                (len(self.by_time), *target.shape.yx),
                dtype=np.uint8 if key == self.scl_key else np.uint16,
            )
            jobs += [
                (item, key, method, src, shape, target, values[key][i])
                for i, item in enumerate(self.by_time)
            ]
        list(self._open()[1].map(lambda job: self._read_asset(*job), jobs))
        if self.warped or self.scl_key not in self.native:
            values.update(self._warped(grown, exact))
        return values

    def _warped(self, grown: GeoBox, exact: GeoBox) -> dict[str, np.ndarray]:
        """The assets not on their own grid in the tile's CRS, warped by odc-stac."""
        import odc.stac

        values: dict[str, np.ndarray] = {}
        with remote.gdal_env(self.network):  # in the reading thread: GDAL's settings are per thread
            try:
                common = dict(
                    groupby="id",
                    stac_cfg=self.stac_cfg,
                    preserve_original_order=True,
                    pool=self.settings.read_threads,
                    patch_url=self.sign,
                )
                loads = (
                    [([self.scl_key], grown, "nearest")] if self.scl_key not in self.native else []
                )
                loads += [(self.warped, exact, "bilinear")] if self.warped else []
                for group, geobox, method in loads:
                    ds = odc.stac.load(
                        self.by_time, bands=group, geobox=geobox, resampling=method, **common
                    )
                    if len(ds.time) != len(self.by_time):
                        raise LcflowError(
                            f"{self.manifest}: {len(self.by_time)} items loaded as {len(ds.time)} scenes"
                        )
                    values.update((k, ds[k].values) for k in group)
            except LcflowError:
                raise
            except Exception as exc:  # GDAL, HTTP or decoding errors of one asset: name it
                raise read_failure(
                    exc,
                    self.by_time,
                    self.keys + [self.scl_key],
                    self.tile,
                    self.year,
                    grown,
                    self.sign,
                ) from exc
        return values

    def cache_size(self, layers: int) -> int:
        """GDAL's block cache for the cube: a decoded block of every asset of every scene, so that z-order
        windows decode each block once (a smaller cache decodes a block again for each window inside it)."""
        cache = gdal_cache_bytes()
        if not self.native:
            return cache
        per_scene = sum(
            self.on_asset(self.by_time[0], k, self._open()[0].block_bytes) for k in self.native
        )
        cube = self.settings
        need = block_cache_bytes(
            per_scene, len(self.by_time), window_bytes(cube.block_px, cube.time_steps, layers)
        )
        cache = block_cache_size(need, cube.cache_mb)
        log.info(
            "tile %s %s: GDAL block cache %d MB for the blocks of %d scenes (%d MB needed)",
            self.tile,
            self.year,
            cache // 2**20,
            len(self.by_time),
            need // 2**20,
        )
        if need > cache:
            log.warning(
                "tile %s %s: the source blocks of %d scenes need %d MB of block cache, more than "
                "cube.cache_mb (%d MB): blocks will be decoded more than once",
                self.tile,
                self.year,
                len(self.by_time),
                need // 2**20,
                cube.cache_mb,
            )
        return cache

    def composite(
        self, loaded: dict[str, np.ndarray], edges, stored: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """A window's composites (float32, or ``stored`` as int16) and clear-observation counts per time
        step, from its loaded scenes (SCL read ``dilation_px`` wider on every side)."""
        px = self.settings.dilation_px
        scl = loaded.pop(self.scl_key)
        values = [loaded.pop(k) for k in self.keys]
        clear = clear_mask(scl, list(self.settings.invalid_scl), px)[
            :, px : scl.shape[1] - px, px : scl.shape[2] - px
        ]
        for dn in values:
            clear &= dn != 0
        return composite(values, clear, self.times, edges, self.offsets, stored)
