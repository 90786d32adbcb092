"""Build the per-tile, per-year data cube: cloud-masked, harmonised, composited onto a regular time grid.

Output ``cube.tif``: a tiled GeoTIFF of int16 reflectance x 10000, one band per (time step, band)
named ``B04_t03``, time-major, nodata -32768, with the time-step dates in its tags. ``cube_valid.tif``:
per time step, how many clear observations went into each composite pixel. The tile is processed window by window,
so a full 10980 x 10980 tile never has to fit in memory.
"""

import contextlib
import logging
import warnings
from pathlib import Path

import numpy as np

from lcflow.common import path_guard
from lcflow.common.atomic import publish_together
from lcflow.common.prefetch import prefetched, written_behind
from lcflow.common.progress import Progress
from lcflow.common.raster import Bands, Grid, staged_cog
from lcflow.errors import LcflowError
from lcflow.retrieve import indices, item_layout, mgrs, radiometry, remote, sentinel2
from lcflow.retrieve.composite import NODATA, fill_time_gaps, to_int16
from lcflow.retrieve.cube_settings import CubeSettings
from lcflow.retrieve.item_layout import Layout
from lcflow.retrieve.scene_reading import Scenes
from lcflow.retrieve.search import manifest_source, read_manifest

log = logging.getLogger("lcflow.retrieve.cube")


def tile_grid(
    tile: str, items, resolution: float, bounds: list[float] | None, key: str | None = None
) -> Grid:
    """The tile's grid in its UTM CRS: the configured area, or the extent of the first item's asset as its
    ``proj:transform`` and ``proj:shape`` give it.

    Args:
        tile: the MGRS tile, whose UTM zone is the grid's CRS.
        items: the tile-year's items.
        resolution: metres per pixel.
        bounds: xmin, ymin, xmax, ymax in the tile's CRS, or None for the extent of the items' asset.
        key: the asset whose extent is taken (the cube's first band's; None: B02's).
    """
    epsg = mgrs.tile_epsg(tile)
    if bounds is None:
        key = key or sentinel2.asset_key(items[0].assets, "B02", items[0].id)
        asset = items[0].assets[key].extra_fields
        if "proj:transform" not in asset or "proj:shape" not in asset:
            raise LcflowError(
                f"tile {tile}: item {items[0].id} has no proj:transform/proj:shape; set aoi.{tile}"
            )
        a, _, x0, _, e, y0 = asset["proj:transform"][:6]
        h, w = asset["proj:shape"]
        bounds = [x0, y0 + e * h, x0 + a * w, y0]
    else:
        mgrs.check_inside_tile(tile, bounds)
    xmin, ymin, xmax, ymax = bounds
    return Grid.from_bounds(epsg, (xmin, ymin, xmax, ymax), resolution)


def check_items(items, tile: str, year: int, settings: CubeSettings) -> Layout:
    """Where every item stores the cube's bands and mask, the same in each, in the tile's CRS and year, its
    offset recorded: checked for all items before any pixel is read (:mod:`lcflow.retrieve.item_layout`,
    :mod:`lcflow.retrieve.radiometry`), so that an item odc-stac would drop or misplace stops the job,
    named."""
    layout = item_layout.layout_of(items, tile, year, settings)
    for item in items:
        for source in layout.bands.values():
            radiometry.scaling(
                item, item.assets[source.key].extra_fields, source.index, settings.boa_add_offset
            )
    return layout


def local_assets(items) -> list[path_guard.Named]:
    """The assets of the items that are local files: inputs no output may overwrite."""
    found = []
    for item in items:
        for key, asset in item.assets.items():
            href = str(asset.href)
            path = href[len("file://") :] if href.startswith("file://") else href
            if not path_guard.is_remote(path):
                found.append(
                    path_guard.Named(f"asset {key} of item {item.id}", path, path_guard.INPUT_FILE)
                )
    return found


def run(
    manifest: str | Path,
    tile: str,
    year: int,
    out_cube: str | Path,
    out_valid: str | Path,
    settings: CubeSettings | None = None,
    *,
    bounds: list[float] | None = None,
    network: remote.Network | None = None,
) -> Grid:
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

    _quiet_warps()
    settings = settings or CubeSettings()
    bands = list(settings.bands)  # checked when the settings were made (CubeSettings)
    spectral_indices = indices.check(list(settings.indices), bands)
    fill_gaps = settings.fill_gaps == "linear"
    scenes = _checked_scenes(manifest, tile, year, (out_cube, out_valid), settings, bounds, network)
    grid, steps = scenes.grid, scenes.time_grid.steps
    layers = [*bands, *spectral_indices]
    # Morton order: the windows inside one tile of a source file follow each other, and find its
    # decompressed pixels in GDAL's block cache (the files stay open)
    windows = list(grid.windows(settings.block_px, order="z"))
    progress = Progress(log, f"cube {tile} {year}", grid.width * grid.height)
    clear_cells = 0
    with (
        _staged(out_cube, out_valid, grid, layers, _tags(scenes, layers, spectral_indices)) as (
            staged_cube,
            staged_valid,
        ),
        scenes.reading() as load,
    ):
        cube, valid = staged_cube.dataset, staged_valid.dataset

        def write_window(win, stored: np.ndarray, counts: np.ndarray) -> None:
            """Compressing a window's 120-odd int16 bands costs as much as computing them: done meanwhile."""
            cube.write(stored, window=win)
            valid.write(counts, window=win)
            progress.add(1, len(windows), int(win.width * win.height))

        cache = scenes.cache_size(len(layers))
        # every window written on leaving
        with (
            rasterio.Env(GDAL_CACHEMAX=cache),
            written_behind() as write,
        ):
            # int16 straight from the medians: nothing follows
            stored = not fill_gaps and not spectral_indices
            for win, loaded in prefetched(load, windows, stop=scenes.stopping):
                comp, counts = scenes.composite(loaded, stored)
                scenes.check_offsets()
                clear_cells += int((counts > 0).sum())
                write(
                    write_window, win, _as_stored(comp, fill_gaps, spectral_indices, bands), counts
                )
                del comp, counts, loaded
        scenes.check_offsets(least=1)
        _check_clear_share(
            clear_cells / (scenes.steps_with_items * grid.width * grid.height),
            settings.min_clear_fraction,
            f"tile {tile} {year}",
            (scenes.steps_with_items, steps),
        )
        # tiled GeoTIFFs (256 px tiles, band-interleaved: see raster.STAGING_INTERLEAVE) as written: a COG's
        # overviews of 120 bands would cost a second pass over the largest file of the workflow
        publish_together(
            [
                (staged_valid.finish(cog=False), staged_valid.final),
                (staged_cube.finish(cog=False), staged_cube.final),
            ]
        )
    return grid


def _tags(scenes: Scenes, layers: list[str], spectral_indices: list[str]) -> dict:
    """What the cube says of itself: its layers, time grid and each item's step, scale, mask, gaps."""
    settings = scenes.settings
    return {
        "tile": scenes.tile,
        "year": str(scenes.year),
        "bands": layers,
        "indices": spectral_indices,
        "time_steps": [c.isoformat() for c in scenes.time_grid.centres],
        "time_edges": [e.isoformat() for e in scenes.time_grid.edges],
        "period": scenes.time_grid.period,
        "item_steps": scenes.item_steps(),
        "scale": "10000",
        "mask": settings.mask,
        "invalid_scl": list(settings.invalid_scl) if settings.mask == "scl" else [],
        "gaps": "linear in time" if settings.fill_gaps == "linear" else "none",
    }


def _quiet_warps() -> None:
    """odc-stac warps SCL (and bands without their own grid) into bare arrays, always with an explicit target
    transform; rasterio still says those arrays have none: not said."""
    from rasterio.errors import NotGeoreferencedWarning

    warnings.filterwarnings("ignore", category=NotGeoreferencedWarning, module="rasterio.warp")


@contextlib.contextmanager
def _staged(out_cube, out_valid, grid: Grid, layers: list[str], tags: dict):
    """The cube's and its valid counts' staging files: a band a layer and time step (``B04_t03``), a band a
    time step (``valid_t03``)."""
    steps = len(tags["time_steps"])
    names = [f"{b}_t{k:02d}" for k in range(steps) for b in layers]
    with (
        staged_cog(
            out_cube,
            grid,
            Bands(steps * len(layers), "int16", NODATA, names),
            tags=tags,
            resampling="average",
        ) as staged_cube,
        staged_cog(
            out_valid,
            grid,
            Bands(steps, "uint8", None, [f"valid_t{k:02d}" for k in range(steps)]),
            tags={"time_steps": tags["time_steps"]},
        ) as staged_valid,
    ):
        yield staged_cube, staged_valid


def _checked_scenes(
    manifest: str | Path,
    tile: str,
    year: int,
    outs: tuple[str | Path, str | Path],
    settings: CubeSettings,
    bounds: list[float] | None,
    network: remote.Network | None,
) -> Scenes:
    """The tile-year's scenes on the cube's grid, once its items, their assets and where they are read
    from are checked, before anything is written (``outs``: the cube and its valid counts)."""
    items = read_manifest(manifest)
    if not items:
        raise LcflowError(f"manifest {manifest} lists no items")
    path_guard.check(
        [
            path_guard.Named("--out", str(outs[0]), path_guard.OUTPUT_FILE),
            path_guard.Named("--valid", str(outs[1]), path_guard.OUTPUT_FILE),
            *local_assets(items),
        ]
    )
    layout = check_items(items, tile, year, settings)
    grid = tile_grid(
        tile, items, settings.resolution, bounds, next(iter(layout.bands.values())).key
    )
    remote.check_credentials_reach(
        ((f"item {i.id} asset {k}", i.assets[k].href) for i in items for k in layout.keys),
        manifest_source(manifest),
    )
    return Scenes(manifest, items, tile, year, grid, layout, settings, network)


def _as_stored(
    comp: np.ndarray, fill_gaps: bool, spectral_indices: list[str], bands: list[str]
) -> np.ndarray:
    """A window's composites (steps, bands, rows, cols) as the cube stores them: gaps filled and indices
    added where asked, int16 (already so where nothing followed the medians), the bands of each step in turn."""
    if comp.dtype != np.int16:
        if fill_gaps:
            comp = fill_time_gaps(comp)
        if spectral_indices:
            comp = np.concatenate(
                [comp, indices.compute(spectral_indices, comp, bands, sentinel2.QUANTIFICATION)],
                axis=1,
            )
        comp = to_int16(comp)
    return comp.reshape(-1, *comp.shape[2:])


def _check_clear_share(
    share: float, min_clear_fraction: float, where: str, steps: tuple[int, int]
) -> None:
    """Refuse a year whose share of clear composite cells, counted over the ``steps[0]`` of its
    ``steps[1]`` steps that hold an item, is under the floor."""
    held, total = steps
    counted = f", of the {held} of {total} steps that hold an item" if held < total else ""
    log.info(
        "%s: %.1f %% of the composite cells%s hold a clear observation", where, 100 * share, counted
    )
    if share < min_clear_fraction:
        raise LcflowError(
            f"{where}: only {100 * share:.1f} % of the composite cells (pixel x time step{counted}) "
            f"hold a clear observation, under the floor of {100 * min_clear_fraction:g} % "
            "(cube.min_clear_fraction lowers it): the year is cloud-covered or the area has no data"
        )
    if share < 2 * min_clear_fraction:
        log.warning(
            "%s: only %.1f %% of the composite cells%s hold a clear observation",
            where,
            100 * share,
            counted,
        )
