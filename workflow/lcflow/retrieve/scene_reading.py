"""The scenes of a tile-year as a cube reads them: each window of every scene's bands and mask on the cube's
grid, read by a pool of threads, assets stored on their own grid in the tile's CRS (as their files' headers
say: :mod:`lcflow.retrieve.scene_files`) read as stored and resampled here
(:mod:`lcflow.retrieve.resample`), the others warped by odc-stac; then composited on the year's time grid
(:mod:`lcflow.retrieve.composite`, :mod:`lcflow.retrieve.time_grid`)."""

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
from lcflow.retrieve import radiometry, remote, resample, scene_files, time_grid
from lcflow.retrieve.asset_reader import AssetReader, AssetReadError, FileFacts
from lcflow.retrieve.block_cache import (
    block_cache_bytes,
    block_cache_size,
    gdal_cache_bytes,
    window_bytes,
)
from lcflow.retrieve.composite import BandReading, clear_mask, clear_where, composite
from lcflow.retrieve.cube_settings import CubeSettings
from lcflow.retrieve.item_layout import MASK, Layout
from lcflow.retrieve.read_failure import first_line, read_failure
from lcflow.retrieve.scene_files import SceneFiles

log = logging.getLogger("lcflow.retrieve.cube")


def resampling_method(transform: Affine, grid: Grid, categorical: bool) -> str:
    """Nearest for classes and for a band on the grid's own pixel size (there: the pixels as stored,
    where the grids are aligned), bilinear for a coarser band."""
    return (
        "nearest"
        if categorical or abs(transform.a - grid.transform.a) < 1e-6 * grid.transform.a
        else "bilinear"
    )


def _resampled(
    values: np.ndarray, src: Affine, method: str, target: GeoBox, nodata: float = 0
) -> np.ndarray:
    """(rows, cols) read on the grid ``src`` resampled onto ``target``, ``nodata`` left out (NaN, none, is
    0 for integers, as what lies beyond a file is read)."""
    if np.isnan(nodata) and not np.issubdtype(values.dtype, np.floating):
        nodata = 0
    if method == "nearest":
        return resample.nearest(values, src, target.transform, target.shape.yx)
    return resample.bilinear(values, src, target.transform, target.shape.yx, nodata=nodata)


def _halo_geobox(grid: Grid, win, halo: int) -> GeoBox:
    """The pixel grid of ``win`` grown by ``halo`` pixels on every side."""
    r0, c0 = int(win.row_off) - halo, int(win.col_off) - halo
    shape = (int(win.height) + 2 * halo, int(win.width) + 2 * halo)
    return GeoBox(shape, grid.transform @ grid.transform.translation(c0, r0), grid.crs)


def _has_data(dn: np.ndarray, nodata: np.ndarray) -> np.ndarray:
    """(obs, rows, cols): where a band holds data, its observations' no-data values (NaN: none) and NaN
    values left out; one value of the array's own type where every observation shares it."""
    if np.issubdtype(dn.dtype, np.floating):
        found = ~np.isnan(dn)
    else:
        found = np.ones(dn.shape, dtype=bool)
    values = nodata[~np.isnan(nodata)]
    if not len(values):
        return found
    if np.all(nodata == nodata[0]) and np.can_cast(np.min_scalar_type(nodata[0]), dn.dtype):
        found &= dn != dn.dtype.type(nodata[0])
    else:
        found &= dn != nodata[:, None, None]
    return found


class Scenes:
    """The scenes of a tile-year as the cube reads them: each window of every scene's bands and mask on the
    cube's grid, read by a pool of threads (each with the network's GDAL settings), assets on their own
    grid in the tile's CRS read as stored and resampled here, the others warped by odc-stac; then
    composited on the year's time grid, each band's DNs scaled as its item says."""

    def __init__(
        self,
        manifest,
        items,
        tile: str,
        year: int,
        grid: Grid,
        layout: Layout,
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
        self.where = f"tile {tile} {year}"
        self.layout = layout
        network = network or remote.Network()
        self.sign = remote.signer(network.signing, items)
        if network.s3_endpoint is None:
            network = dataclasses.replace(network, s3_endpoint=remote.s3_endpoint(items))
        self.network, self.options = network, network.gdal_options()
        self.by_time = sorted(items, key=lambda i: (time_grid.item_time(i), i.id))
        self.time_grid = time_grid.year_grid(year, settings.time_steps, settings.period)
        intervals = [time_grid.item_interval(i) for i in self.by_time]
        self.step_of = time_grid.steps_of(intervals, self.time_grid.edges)
        missed = [i.id for i, k in zip(self.by_time, self.step_of) if k < 0]
        if missed:
            raise LcflowError(
                f"{self.where}: {len(missed)} item(s) fall in no step of the year's grid (the first: "
                f"{missed[0]})"
            )
        for step, ids in time_grid.composites_sharing_steps(self.by_time, intervals, self.step_of):
            log.warning(
                "%s: step %d (%s) holds %d composites (%s): their median is taken; a grid of their own "
                "period (cube.period) keeps them apart",
                self.where,
                step,
                self.time_grid.centres[step],
                len(ids),
                ", ".join(ids),
            )
        # refused here, before any file is opened, where an item records no offset
        self.scalings = {
            band: [
                radiometry.scaling(
                    item, item.assets[s.key].extra_fields, s.index, settings.boa_add_offset
                )
                for item in self.by_time
            ]
            for band, s in layout.bands.items()
        }
        # per observation: its clear values, and those far below 0 (composite.FAR_BELOW_ZERO)
        self.low = np.zeros((len(self.by_time), 2), np.int64)
        self.files: SceneFiles | None = None  # once reading() has surveyed them
        self._thread = threading.local()
        self._reading: tuple[AssetReader, ThreadPoolExecutor] | None = None  # while reading()
        # set when the windows' consumer has left: reads not begun are skipped
        self.stopping = threading.Event()

    @property
    def steps_with_items(self) -> int:
        """How many steps of the year's grid hold an item."""
        return len(set(self.step_of.tolist()))

    def item_steps(self) -> dict[str, int]:
        """Each item's time step, for the cube's tags."""
        return {i.id: int(k) for i, k in zip(self.by_time, self.step_of)}

    @contextlib.contextmanager
    def reading(self):
        """The asset reader and its threads, open for the block, every file surveyed; yields :meth:`load`."""
        with (
            AssetReader(self.sign) as reader,
            ThreadPoolExecutor(
                self.settings.read_threads,
                thread_name_prefix="lcflow-asset",
                initializer=self._take_settings,
            ) as readers,
        ):
            self._reading = reader, readers
            try:
                self._survey()
                yield self.load
            finally:
                self._reading = None

    def _survey(self) -> None:
        """Every file opened (by the reading threads) and checked against its item: how each is read."""
        reader, readers = self._open()
        jobs = [(item, key) for item in self.by_time for key in self.layout.keys]
        found = dict(
            zip(
                [(i.id, k) for i, k in jobs],
                readers.map(lambda job: self.on_asset(job[0], job[1], reader.facts), jobs),
            )
        )

        def header(item, key: str) -> FileFacts:
            return found[(item.id, key)]

        self.files = scene_files.survey(self.by_time, self.layout, header, self.grid, self.where)
        self.native = {
            k: (t, resampling_method(t, self.grid, self._categorical(k)))
            for k, t in self.files.native.items()
        }
        self.warped = [n for n, s in self.layout.reads.items() if s.key not in self.native]
        if any(method == "bilinear" for _, method in self.native.values()):
            resample.compiled()
        self.readings = [
            BandReading(
                np.array([s.gain for s in self.scalings[band]], np.float32),
                np.array([s.bias for s in self.scalings[band]], np.float32),
                self.files.nodata[band],
            )
            for band in self.layout.bands
        ]

    def _categorical(self, key: str) -> bool:
        """The mask's asset is classes: taken by nearest neighbour."""
        return self.layout.mask is not None and key == self.layout.mask.key

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
                    f"{self.where}: reading item {item.id} asset {key} "
                    f"({remote.redact(item.assets[key].href)}) failed: {said}"
                ) from exc

    def _read_asset(
        self,
        item,
        name: str,
        k: int,
        method: str,
        src: Affine,
        shape: tuple[int, int],
        target: GeoBox,
        out: np.ndarray,
    ) -> None:
        """Observation ``k``'s band ``name`` read on its own grid (``src``, ``shape``) and resampled onto
        ``target`` into ``out``, in a reading thread: the reading threads resample while the main one
        composites."""
        if self.stopping.is_set():
            return
        assert self.files is not None
        source, nodata = self.layout.reads[name], self.files.nodata[name][k]
        kind = self.files.item_dtypes[name][k]
        fill = 0 if np.isnan(nodata) and not np.issubdtype(kind, np.floating) else nodata
        read = self._open()[0].read
        as_stored = (
            method == "nearest" and src.almost_equals(target.transform) and shape == target.shape.yx
        )
        if as_stored and kind == out.dtype:
            self.on_asset(
                item, source.key, read, src, shape, out, source.index, fill
            )  # the pixels as stored
            return
        stored = self.on_asset(
            item, source.key, read, src, shape, np.empty(shape, kind), source.index, fill
        )
        out[...] = stored if as_stored else _resampled(stored, src, method, target, nodata)

    def load(self, win) -> dict[str, np.ndarray]:
        """One window of every scene: DNs per band (and the mask) on the cube's grid. The mask comes grown
        by its halo (a halo on every band would decompress the neighbouring tiles of every file again)."""
        assert self.files is not None
        grown, exact = (
            _halo_geobox(self.grid, win, self.settings.dilation_px),
            _halo_geobox(self.grid, win, 0),
        )
        values: dict[str, np.ndarray] = {}
        jobs = []
        for name, source in self.layout.reads.items():
            if source.key not in self.native:
                continue
            transform, method = self.native[source.key]
            target = grown if name == MASK else exact
            src, shape = resample.source_window(
                transform, target.transform, target.shape.yx, method
            )
            values[name] = np.empty(
                (len(self.by_time), *target.shape.yx), dtype=self.files.dtypes[name]
            )
            jobs += [
                (item, name, k, method, src, shape, target, values[name][k])
                for k, item in enumerate(self.by_time)
            ]
        list(self._open()[1].map(lambda job: self._read_asset(*job), jobs))
        if self.warped:
            values.update(self._warped(grown, exact))
        return values

    def _warped(self, grown: GeoBox, exact: GeoBox) -> dict[str, np.ndarray]:
        """The bands (and mask) not on their own grid in the tile's CRS, warped by odc-stac."""
        import odc.stac

        assert self.files is not None
        values: dict[str, np.ndarray] = {}
        reads = self.layout.reads
        # one type and no-data value an asset, as odc-stac takes them
        stac_cfg = {
            "assets": {
                reads[n].key: {
                    "data_type": self.files.dtypes[n].name,
                    "nodata": float(self.files.nodata[n][0]),
                    "unit": "1",
                }
                for n in self.warped
            }
        }
        with remote.gdal_env(self.network):  # in the reading thread: GDAL's settings are per thread
            try:
                common = dict(
                    groupby="id",
                    stac_cfg=stac_cfg,
                    preserve_original_order=True,
                    pool=self.settings.read_threads,
                    patch_url=self.sign,
                )
                loads = [([MASK], grown, "nearest")] if MASK in self.warped else []
                bands = [n for n in self.warped if n != MASK]
                loads += [(bands, exact, "bilinear")] if bands else []
                for group, geobox, method in loads:
                    ds = odc.stac.load(
                        self.by_time,
                        bands=[reads[n].key for n in group],
                        geobox=geobox,
                        resampling=method,
                        **common,
                    )
                    if len(ds.time) != len(self.by_time):
                        raise LcflowError(
                            f"{self.manifest}: {len(self.by_time)} items loaded as {len(ds.time)} scenes"
                        )
                    values.update((n, ds[reads[n].key].values) for n in group)
            except LcflowError:
                raise
            except Exception as exc:  # GDAL, HTTP or decoding errors of one asset: name it
                raise read_failure(
                    exc,
                    self.by_time,
                    self.layout.keys,
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
            per_scene,
            len(self.by_time),
            window_bytes(cube.block_px, self.time_grid.steps, layers),
        )
        cache = block_cache_size(need, cube.cache_mb)
        log.info(
            "%s: GDAL block cache %d MB for the blocks of %d scenes (%d MB needed)",
            self.where,
            cache // 2**20,
            len(self.by_time),
            need // 2**20,
        )
        if need > cache:
            log.warning(
                "%s: the source blocks of %d scenes need %d MB of block cache, more than "
                "cube.cache_mb (%d MB): blocks will be decoded more than once",
                self.where,
                len(self.by_time),
                need // 2**20,
                cube.cache_mb,
            )
        return cache

    def composite(
        self, loaded: dict[str, np.ndarray], stored: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """A window's composites (float32, or ``stored`` as int16) and clear-observation counts per time
        step, from its loaded scenes (the mask read ``dilation_px`` wider on every side)."""
        assert self.files is not None
        px, cube = self.settings.dilation_px, self.settings
        mask = loaded.pop(MASK, None)
        values = [loaded.pop(b) for b in self.layout.bands]
        if mask is None:
            clear = np.ones(values[0].shape, dtype=bool)
        else:
            if cube.mask == "asset":
                grown = clear_where(mask, list(cube.mask_clear), self.files.nodata[MASK], px)
            else:
                grown = clear_mask(mask, list(cube.invalid_scl), px)
            clear = grown[:, px : mask.shape[1] - px, px : mask.shape[2] - px]
        has = np.zeros(clear.shape, dtype=bool)
        for band, dn in zip(self.layout.bands, values):
            has |= _has_data(dn, self.files.nodata[band])
        clear &= has
        return composite(
            values, clear, self.step_of, self.time_grid.steps, self.readings, stored, self.low
        )

    def check_offsets(self, least: int = 1000) -> None:
        """Refuse the year where an item's clear reflectances lie far below 0 (under -0.05) in more than
        5 % of its values seen so far (``least`` at least): an offset taken from pixels that had none, or
        a record that does not describe the pixels."""
        seen, below = self.low[:, 0], self.low[:, 1]
        bad = np.flatnonzero((seen >= least) & (below > 0.05 * np.maximum(seen, 1)))
        if not len(bad):
            return
        k = int(bad[np.argmax(below[bad] / seen[bad])])
        item, scaling = self.by_time[k], next(iter(self.scalings.values()))[k]
        raise LcflowError(
            f"{self.where}: item {item.id}: {100 * below[k] / seen[k]:.0f} % of its clear reflectances lie "
            f"below -0.05 once its offset of {scaling.bias:g} DN ({scaling.said}) is applied "
            f"({len(bad)} item(s) so): its pixels hold no offset to remove, or its record does not "
            "describe them; an item that records no offset takes cube.boa_add_offset"
        )
