"""Write the embedded demo: a static STAC catalog of synthetic Sentinel-2 L2A scenes, CORINE, truth."""

import datetime as dt
import json
import os
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pystac
from rasterio.warp import transform_geom

from lcflow.common.atomic import staging_dir, write_text
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


def _item(
    tile: str, grid: Grid, day: dt.datetime, satellite: str, cover: float, baseline: str
) -> pystac.Item:
    epsg = grid.crs.to_epsg()
    xmin, ymin, xmax, ymax = grid.bounds
    footprint = {
        "type": "Polygon",
        "coordinates": [[(xmin, ymin), (xmax, ymin), (xmax, ymax), (xmin, ymax), (xmin, ymin)]],
    }
    geom = transform_geom(grid.crs, "EPSG:4326", footprint)
    lons = [p[0] for p in geom["coordinates"][0]]
    lats = [p[1] for p in geom["coordinates"][0]]
    item_id = f"{satellite}_{tile}_{day:%Y%m%d}_0_L2A"
    return pystac.Item(
        id=item_id,
        geometry=geom,
        bbox=[min(lons), min(lats), max(lons), max(lats)],
        datetime=day,
        stac_extensions=EXTENSIONS,
        collection=COLLECTION,
        properties={
            "platform": "sentinel-2a" if satellite == "S2A" else "sentinel-2b",
            "constellation": "sentinel-2",
            "instruments": ["msi"],
            "eo:cloud_cover": round(100 * cover, 3),
            "proj:epsg": epsg,
            "mgrs:utm_zone": int(tile[:2]),
            "mgrs:latitude_band": tile[2],
            "mgrs:grid_square": tile[3:],
            "grid:code": f"MGRS-{tile}",
            "s2:product_type": "S2MSI2A",
            "s2:processing_baseline": baseline,
            "earthsearch:boa_offset_applied": False,
        },
    )


def write_scenes(
    out: Path,
    tile: str,
    grid: Grid,
    years: list[int],
    truths: dict[int, np.ndarray],
    parcels: np.ndarray,
    acquisitions: tuple[int, int],
) -> list[pystac.Item]:
    """All acquisitions of a tile: one STAC item per date with a COG per band and SCL.

    Args:
        out: the demo's folder.
        tile: the MGRS tile.
        grid: the tile area's grid.
        years: the years of acquisitions.
        truths: each year's true classes on ``grid``.
        parcels: the parcel id of each pixel (fields, forest stands), for variation between parcels.
        acquisitions: the least and most acquisitions a year.
    """
    items = []
    for year in years:
        rng = np.random.default_rng(_seed("scenes", tile, year))
        days = acquisition_days(rng, *acquisitions)
        clear = spectra.reflectance(truths[year], parcels, days, rng)
        baseline = "02.06" if year < 2019 else "02.07"
        for k, doy in enumerate(days):
            cover = clouds.cloud_cover_fraction(rng)
            refl, scl = clouds.observe(clear[k], rng, cover)
            when = dt.datetime(year, 1, 1, 10, 56, 29, tzinfo=dt.timezone.utc) + dt.timedelta(
                days=int(doy) - 1
            )
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
    item.add_asset(
        EARTH_SEARCH_KEYS[band],
        pystac.Asset(
            href=str(path.resolve()),
            media_type=pystac.MediaType.COG,
            roles=["data"],
            title=band,
            extra_fields={
                "proj:shape": [band_grid.height, band_grid.width],
                "proj:transform": list(band_grid.transform)[:6],
                "raster:bands": [raster],
                **({"eo:bands": [{"name": band}]} if band != "SCL" else {}),
            },
        ),
    )


def check_aoi(tile: str, bounds) -> None:
    """A demo area is a square inside its tile, [xmin, ymin, xmax, ymax] in the tile's UTM CRS."""
    if (
        not isinstance(bounds, list)
        or len(bounds) != 4
        or bounds[0] >= bounds[2]
        or bounds[1] >= bounds[3]
    ):
        raise LcflowError(f"demo aoi of {tile} = {bounds!r} is not [xmin, ymin, xmax, ymax]")
    if bounds[2] - bounds[0] != bounds[3] - bounds[1]:
        raise LcflowError(f"demo aoi of {tile} = {bounds} must be square")
    mgrs.check_inside_tile(tile, bounds)


@dataclass(frozen=True)
class Scenery:
    """What a demo tile-year's landscape and scenes follow from, besides its tile and year: the first year
    (CORINE's, before the change), the pixel size, the acquisitions a year and the share that changes."""

    first_year: int
    resolution: float = float(default("cube.resolution"))
    acquisitions: tuple[int, int] = tuple(default("demo.acquisitions"))
    change_fraction: float = default("demo.change_fraction")

    def landscape(self, tile: str, bounds: list[float]) -> tuple[Grid, landscape.Landscape]:
        xmin, ymin, xmax, ymax = bounds
        grid = Grid.from_bounds(mgrs.tile_epsg(tile), (xmin, ymin, xmax, ymax), self.resolution)
        return grid, landscape.generate(
            np.random.default_rng(_seed("landscape", tile)), grid.width, self.change_fraction
        )


def tile_year_catalog(out: Path, tile: str, year: int) -> Path:
    """Where a demo tile-year's catalogue is written: a catalogue of its own, so that adding a year or a tile
    writes only its own scenes."""
    return Path(out) / "catalog" / f"{tile}_{year}" / "catalog.json"


def write_tile_year(
    out: str | Path, tile: str, bounds: list[float], year: int, scenery: Scenery
) -> Path:
    """The scenes (a STAC catalogue of their own) and the truth of one tile-year; the same bytes whatever
    other tiles and years the demo has. Returns the catalogue.

    Args:
        out: the demo's folder.
        tile: the MGRS tile.
        bounds: the tile area in the tile's CRS.
        year: the year.
        scenery: the resolution, acquisitions and landscape parameters the demo is made with.
    """
    check_aoi(tile, bounds)
    out = Path(out)
    grid, land = scenery.landscape(tile, bounds)
    truth = land.before if year == scenery.first_year else land.after
    legend = {e.clc_code: e.rgb for e in nomenclature.clc_legend()}
    write_cog(
        out / "truth" / f"{tile}_{year}.tif",
        truth,
        grid,
        nodata=0,
        colors=legend,
        names={e.clc_code: e.label3 for e in nomenclature.clc_legend()},
        tags={"content": "synthetic truth, CLC level-3 codes"},
    )
    final = tile_year_catalog(out, tile, year).parent
    with staging_dir(final) as stage:
        catalog = pystac.Catalog(
            f"lcflow-demo-{tile}-{year}", f"Synthetic Sentinel-2 L2A scenes of {tile} in {year}"
        )
        collection = pystac.Collection(
            COLLECTION,
            "Synthetic Sentinel-2 L2A (Earth Search v1 layout)",
            pystac.Extent(
                pystac.SpatialExtent([[-180.0, -90.0, 180.0, 90.0]]),
                pystac.TemporalExtent(
                    [
                        [
                            dt.datetime(year, 1, 1, tzinfo=dt.timezone.utc),
                            dt.datetime(year, 12, 31, tzinfo=dt.timezone.utc),
                        ]
                    ]
                ),
            ),
        )
        catalog.add_child(collection)
        for item in write_scenes(
            stage, tile, grid, [year], {year: truth}, land.parcels, scenery.acquisitions
        ):
            collection.add_item(item)
        collection.update_extent_from_items()
        catalog.normalize_hrefs(str(stage.resolve()))
        catalog.make_all_asset_hrefs_relative()
        catalog.save(pystac.CatalogType.SELF_CONTAINED)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(stage, final)
    return final / "catalog.json"


def write_corine(
    out: str | Path, aoi: dict[str, list[float]], scenery: Scenery, mmu_cells: int
) -> Path:
    """The demo's CORINE raster of the first year over every tile area (grid codes, EPSG:3035, 100 m)."""
    truths = []
    for tile, bounds in aoi.items():
        check_aoi(tile, bounds)
        grid, land = scenery.landscape(tile, bounds)
        truths.append((land.before, grid))
    codes, grid = corine.generalise(truths, mmu_cells)
    path = Path(out) / "corine" / "clc_demo_3035.tif"
    write_cog(
        path,
        codes,
        grid,
        nodata=nomenclature.CLC_NODATA_GRID,
        colors={e.grid_code: e.rgb for e in nomenclature.clc_legend()},
        tags={"content": f"synthetic CORINE {scenery.first_year}, grid codes"},
    )
    return path


def write_root_catalog(out: str | Path, children: list[Path]) -> Path:
    """The demo's catalogue: every tile-year's catalogue as a child (``stac.catalog`` of the demo config)."""
    root = Path(out) / "catalog" / "catalog.json"
    catalog = {
        "type": "Catalog",
        "stac_version": "1.1.0",
        "id": "lcflow-demo",
        "description": "Synthetic Sentinel-2 L2A scenes for the lcflow demo",
        "links": [{"rel": "root", "href": "./catalog.json", "type": "application/json"}]
        + [
            {
                "rel": "child",
                "href": f"./{Path(c).parent.name}/catalog.json",
                "type": "application/json",
            }
            for c in sorted(children)
        ],
    }
    write_text(root, json.dumps(catalog, indent=2) + "\n")
    return root


def make_demo(
    out: str | Path,
    aoi: dict[str, list[float]],
    years: list[int],
    resolution: float = float(default("cube.resolution")),
    acquisitions: tuple[int, int] = tuple(default("demo.acquisitions")),
    mmu_cells: int = default("demo.mmu_cells"),
    change_fraction: float = default("demo.change_fraction"),
) -> None:
    """Write catalog/ (a catalogue of every tile-year's), corine/clc_demo_3035.tif and truth/{tile}_{year}.tif
    under ``out``.

    Args:
        out: the demo's folder.
        aoi: each tile's area, xmin, ymin, xmax, ymax in its CRS.
        years: the years.
        resolution: metres per pixel.
        acquisitions: the least and most acquisitions a year.
        mmu_cells: the demo CORINE's minimum mapping unit, in 100 m cells.
        change_fraction: the share of the area that changes class between the first and last year.
    """
    out = Path(out)
    for tile, bounds in aoi.items():
        check_aoi(tile, bounds)
    for sub in ("catalog", "truth", "corine"):
        shutil.rmtree(out / sub, ignore_errors=True)
    scenery = Scenery(years[0], resolution, (acquisitions[0], acquisitions[1]), change_fraction)
    children = [
        write_tile_year(out, tile, bounds, year, scenery)
        for tile, bounds in aoi.items()
        for year in years
    ]
    write_root_catalog(out, children)
    write_corine(out, aoi, scenery, mmu_cells)
