"""A look-alike of a user's own monthly composites (openEO-style): one 9-band file a month, dated the 1st with
the month as its interval (some with ``datetime: null``), nodata 65535, no scene classification (already
cloud-masked), the offset already removed and no processing baseline recorded.

Made from the demo's scenes of a tile (no real multi-month series is at hand): each month's median of the
clear observations, masked by their SCL; a month without scenes, or without a clear one at a pixel, holds
65535 there. Tests of the cube and of the whole workflow read it as a user's catalogue."""

import datetime as dt
import json
from pathlib import Path

import numpy as np
import rasterio
from rasterio.enums import Resampling

from lcflow.retrieve import search, stac_sources
from lcflow.retrieve.sentinel2 import EARTH_SEARCH_KEYS

BANDS = ["B02", "B03", "B04", "B05", "B06", "B07", "B08", "B11", "B12"]
NODATA = 65535
INVALID_SCL = (0, 1, 3, 8, 9, 10)


def months(first: tuple[int, int], count: int) -> list[tuple[int, int]]:
    year, month = first
    return [(year + (month - 1 + k) // 12, (month - 1 + k) % 12 + 1) for k in range(count)]


def write_composites(demo: Path, out: Path, tile: str = "31UFT", first=(2018, 1), count: int = 20) -> Path:
    """``count`` monthly composites of ``tile`` from ``first`` (year, month) as a static catalogue under
    ``out``; its path. Odd months are dated (datetime the 1st), even ones have ``datetime: null``."""
    scenes = [i for i in stac_sources.from_catalog(str(demo / "catalog" / "catalog.json"))
              if search.item_tile(i) == tile]
    out.mkdir(parents=True)
    links = []
    for year, month in months(first, count):
        start = dt.datetime(year, month, 1, tzinfo=dt.timezone.utc)
        end = dt.datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=dt.timezone.utc) - dt.timedelta(seconds=1)
        of_month = [i for i in scenes if start <= i.datetime <= end]
        item_id = f"composite_{tile}_{year}_{month:02d}"
        folder = out / item_id
        folder.mkdir()
        profile = _composite(of_month, scenes[0], folder / "data.tif")
        item = {
            "type": "Feature", "stac_version": "1.0.0", "id": item_id,
            "stac_extensions": ["https://stac-extensions.github.io/eo/v1.1.0/schema.json",
                                "https://stac-extensions.github.io/raster/v1.1.0/schema.json",
                                "https://stac-extensions.github.io/projection/v1.1.0/schema.json"],
            "geometry": scenes[0].geometry, "bbox": scenes[0].bbox,
            "properties": {"datetime": start.isoformat().replace("+00:00", "Z") if month % 2 else None,
                           "start_datetime": start.isoformat().replace("+00:00", "Z"),
                           "end_datetime": end.isoformat().replace("+00:00", "Z"),
                           "grid:code": f"MGRS-{tile}", "proj:epsg": profile["crs"].to_epsg()},
            "assets": {"data": {
                "href": "./data.tif", "type": "image/tiff; application=geotiff", "roles": ["data"],
                "eo:bands": [{"name": b} for b in BANDS], "raster:bands": [{"nodata": NODATA} for _ in BANDS],
                "proj:shape": [profile["height"], profile["width"]],
                "proj:transform": list(profile["transform"])[:6]}},
            "links": [{"rel": "root", "href": "../catalog.json"}, {"rel": "parent", "href": "../catalog.json"}],
        }
        (folder / "item.json").write_text(json.dumps(item))
        links.append({"rel": "item", "href": f"./{item_id}/item.json"})
    (out / "catalog.json").write_text(json.dumps({
        "type": "Catalog", "stac_version": "1.0.0", "id": "composites", "description": "monthly composites",
        "links": [{"rel": "root", "href": "./catalog.json"}, *links]}))
    return out / "catalog.json"


def _composite(of_month, any_scene, path: Path) -> dict:
    """The month's median of clear observations per band at 10 m (20 m bands taken by nearest neighbour),
    NODATA where none; the file's profile."""
    with rasterio.open(any_scene.assets[EARTH_SEARCH_KEYS["B02"]].href) as ref:
        profile = {**ref.profile, "driver": "GTiff", "count": len(BANDS), "nodata": NODATA, "dtype": "uint16"}
        shape = ref.shape
    stack = np.full((len(of_month), len(BANDS), *shape), np.nan, np.float32)
    for k, item in enumerate(of_month):
        with rasterio.open(item.assets[EARTH_SEARCH_KEYS["SCL"]].href) as src:
            clear = ~np.isin(src.read(1, out_shape=shape, resampling=Resampling.nearest), INVALID_SCL)
        for b, band in enumerate(BANDS):
            with rasterio.open(item.assets[EARTH_SEARCH_KEYS[band]].href) as src:
                dn = src.read(1, out_shape=shape, resampling=Resampling.nearest).astype(np.float32)
            stack[k, b] = np.where(clear & (dn > 0), dn, np.nan)
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            median = np.nanmedian(stack, axis=0) if len(of_month) else np.full((len(BANDS), *shape), np.nan)
    data = np.where(np.isnan(median), NODATA, np.round(median)).astype(np.uint16)
    for key in ("blockxsize", "blockysize", "tiled", "compress", "interleave", "photometric"):
        profile.pop(key, None)
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
    return profile


def read_composite(catalogue: Path, year: int, month: int, tile: str = "31UFT") -> np.ndarray:
    """(bands, rows, cols) DNs of one month's composite as written."""
    with rasterio.open(catalogue.parent / f"composite_{tile}_{year}_{month:02d}" / "data.tif") as src:
        return src.read()
