"""Write the embedded demo: a static STAC catalog of synthetic Sentinel-2 L2A scenes, CORINE, truth."""

import datetime as dt
import shutil
import zlib
from pathlib import Path

import numpy as np
import pystac
from rasterio.warp import transform_geom

from lcflow.common.raster import Grid, write_cog
from lcflow.defaults import default
from lcflow.errors import LcflowError
from lcflow.labels import nomenclature
from lcflow.retrieve import mgrs
from lcflow.retrieve.sentinel2 import BAND_RESOLUTION, EARTH_SEARCH_KEYS
from lcflow.synth import clouds, corine, landscape, spectra

COLLECTION = "sentinel-2-l2a"
EXTENSIONS = [
    "https://stac-extensions.github.io/eo/v1.1.0/schema.json",
    "https://stac-extensions.github.io/projection/v1.1.0/schema.json",
    "https://stac-extensions.github.io/raster/v1.1.0/schema.json",
    "https://stac-extensions.github.io/grid/v1.0.0/schema.json",
    "https://stac-extensions.github.io/mgrs/v1.0.0/schema.json",
]


def _seed(*parts: object) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode())


def acquisition_days(rng: np.random.Generator, low: int, high: int) -> np.ndarray:
    """Days of year on the 5-day revisit grid of the two Sentinel-2 satellites."""
    n = int(rng.integers(low, high + 1))
    return np.sort(rng.choice(np.arange(int(rng.integers(1, 6)), 365, 5), n, replace=False))


def _item(tile: str, grid: Grid, day: dt.datetime, satellite: str, cover: float, baseline: str) -> pystac.Item:
    epsg = grid.crs.to_epsg()
    xmin, ymin, xmax, ymax = grid.bounds
    footprint = {"type": "Polygon", "coordinates": [[(xmin, ymin), (xmax, ymin), (xmax, ymax), (xmin, ymax), (xmin, ymin)]]}
    geom = transform_geom(grid.crs, "EPSG:4326", footprint)
    lons = [p[0] for p in geom["coordinates"][0]]
    lats = [p[1] for p in geom["coordinates"][0]]
    item_id = f"{satellite}_{tile}_{day:%Y%m%d}_0_L2A"
    return pystac.Item(
        id=item_id, geometry=geom, bbox=[min(lons), min(lats), max(lons), max(lats)], datetime=day,
        stac_extensions=EXTENSIONS, collection=COLLECTION,
        properties={
            "platform": "sentinel-2a" if satellite == "S2A" else "sentinel-2b",
            "constellation": "sentinel-2", "instruments": ["msi"],
            "eo:cloud_cover": round(100 * cover, 3), "proj:epsg": epsg,
            "mgrs:utm_zone": int(tile[:2]), "mgrs:latitude_band": tile[2], "mgrs:grid_square": tile[3:],
            "grid:code": f"MGRS-{tile}", "s2:product_type": "S2MSI2A",
            "s2:processing_baseline": baseline, "earthsearch:boa_offset_applied": False,
        },
    )


def write_scenes(out: Path, tile: str, grid: Grid, years: list[int], truths: dict[int, np.ndarray],
                 parcels: np.ndarray, acquisitions: tuple[int, int]) -> list[pystac.Item]:
    """All acquisitions of a tile: one STAC item per date with a COG per band and SCL."""
    items = []
    for year in years:
        rng = np.random.default_rng(_seed("scenes", tile, year))
        days = acquisition_days(rng, *acquisitions)
        clear = spectra.reflectance(truths[year], parcels, days, rng)
        baseline = "02.06" if year < 2019 else "02.07"
        for k, doy in enumerate(days):
            cover = clouds.cloud_cover_fraction(rng)
            refl, scl = clouds.observe(clear[k], rng, cover)
            when = dt.datetime(year, 1, 1, 10, 56, 29, tzinfo=dt.timezone.utc) + dt.timedelta(days=int(doy) - 1)
            sat = "S2A" if k % 2 == 0 else "S2B"
            flagged = float(np.isin(scl, (3, 8, 9, 10)).mean())
            item = _item(tile, grid, when, sat, flagged, baseline)
            item_dir = out / COLLECTION / item.id
            for b, band in enumerate(spectra.BANDS):
                _add_asset(item, item_dir, band, _to_dn(refl[b], BAND_RESOLUTION[band] // 10), grid)
            _add_asset(item, item_dir, "SCL", scl[::2, ::2], grid)
            items.append(item)
    return items


def _to_dn(refl: np.ndarray, factor: int) -> np.ndarray:
    """Reflectance -> uint16 digital numbers (x 10000, 0 is nodata), block-averaged to coarser bands."""
    if factor > 1:
        h, w = refl.shape
        refl = refl.reshape(h // factor, factor, w // factor, factor).mean(axis=(1, 3))
    return np.clip(np.round(refl * 10000), 1, 30000).astype(np.uint16)


def _add_asset(item: pystac.Item, item_dir: Path, band: str, data: np.ndarray, grid: Grid) -> None:
    res = BAND_RESOLUTION[band]
    band_grid = Grid.from_bounds(grid.crs, grid.bounds, res)
    path = item_dir / f"{band}.tif"
    write_cog(path, data, band_grid, nodata=0, resampling="nearest" if band == "SCL" else "average")
    raster = {"nodata": 0, "data_type": data.dtype.name, "spatial_resolution": res}
    if band != "SCL":
        raster.update(scale=0.0001, offset=0)
    item.add_asset(EARTH_SEARCH_KEYS[band], pystac.Asset(
        href=str(path.resolve()), media_type=pystac.MediaType.COG, roles=["data"], title=band,
        extra_fields={"proj:shape": [band_grid.height, band_grid.width],
                      "proj:transform": list(band_grid.transform)[:6], "raster:bands": [raster],
                      **({"eo:bands": [{"name": band}]} if band != "SCL" else {})},
    ))


def make_demo(out: str | Path, aoi: dict[str, list[float]], years: list[int], resolution: float = float(default("cube.resolution")),
              acquisitions: tuple[int, int] = tuple(default("demo.acquisitions")), mmu_cells: int = default("demo.mmu_cells"),
              change_fraction: float = default("demo.change_fraction")) -> None:
    """Write catalog/, corine/clc_demo_3035.tif and truth/{tile}_{year}.tif under ``out``."""
    out = Path(out)
    for tile, bounds in aoi.items():
        if not isinstance(bounds, list) or len(bounds) != 4 or bounds[0] >= bounds[2] or bounds[1] >= bounds[3]:
            raise LcflowError(f"demo aoi of {tile} = {bounds!r} is not [xmin, ymin, xmax, ymax]")
        if bounds[2] - bounds[0] != bounds[3] - bounds[1]:
            raise LcflowError(f"demo aoi of {tile} = {bounds} must be square")
        mgrs.check_inside_tile(tile, bounds)
    for sub in ("catalog", "truth", "corine"):
        shutil.rmtree(out / sub, ignore_errors=True)
    first, second = years[0], years[-1]
    catalog = pystac.Catalog("lcflow-demo", "Synthetic Sentinel-2 L2A scenes for the lcflow demo")
    collection = pystac.Collection(
        COLLECTION, "Synthetic Sentinel-2 L2A (Earth Search v1 layout)",
        pystac.Extent(pystac.SpatialExtent([[-180, -90, 180, 90]]),
                      pystac.TemporalExtent([[dt.datetime(first, 1, 1, tzinfo=dt.timezone.utc),
                                              dt.datetime(second, 12, 31, tzinfo=dt.timezone.utc)]])),
    )
    catalog.add_child(collection)
    legend = {e.clc_code: e.rgb for e in nomenclature.clc_legend()}
    truths_for_clc = []
    for tile, bounds in aoi.items():
        grid = Grid.from_bounds(mgrs.tile_epsg(tile), tuple(bounds), resolution)
        rng = np.random.default_rng(_seed("landscape", tile))
        land = landscape.generate(rng, grid.width, change_fraction)
        truths = {y: (land.before if y == first else land.after) for y in years}
        for year, truth in truths.items():
            write_cog(out / "truth" / f"{tile}_{year}.tif", truth, grid, nodata=0, colors=legend,
                      tags={"content": "synthetic truth, CLC level-3 codes"})
        truths_for_clc.append((land.before, grid))
        for item in write_scenes(out / "catalog", tile, grid, years, truths, land.parcels, acquisitions):
            collection.add_item(item)
    collection.update_extent_from_items()
    catalog.normalize_hrefs(str((out / "catalog").resolve()))
    catalog.make_all_asset_hrefs_relative()
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    codes, grid = corine.generalise(truths_for_clc, mmu_cells)
    grid_legend = {e.grid_code: e.rgb for e in nomenclature.clc_legend()}
    write_cog(out / "corine" / "clc_demo_3035.tif", codes, grid, nodata=nomenclature.CLC_NODATA_GRID,
              colors=grid_legend, tags={"content": f"synthetic CORINE {first}, grid codes"})
