"""Find the Sentinel-2 L2A items of one MGRS tile and year, from a STAC API or a local static catalog.

The result is a manifest (a STAC ItemCollection, ``items.json``) with absolute asset hrefs, so later
stages never search again and a rerun of ``cube`` reads exactly the same scenes.
"""

import datetime as dt
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pystac

from . import mgrs
from .atomic import write_text
from .errors import LcflowError


def item_tile(item: pystac.Item) -> str | None:
    """MGRS tile of an item, from whichever property its catalogue uses."""
    p = item.properties
    if "grid:code" in p and str(p["grid:code"]).startswith("MGRS-"):
        return str(p["grid:code"])[5:]
    if "s2:mgrs_tile" in p:
        return str(p["s2:mgrs_tile"])
    if all(k in p for k in ("mgrs:utm_zone", "mgrs:latitude_band", "mgrs:grid_square")):
        return f"{int(p['mgrs:utm_zone']):02d}{p['mgrs:latitude_band']}{p['mgrs:grid_square']}"
    return None


def select(items: Iterable[pystac.Item], tile: str, year: int, max_cloud_cover: float = 100.0) -> list[pystac.Item]:
    """Items of ``tile`` acquired in ``year`` with at most ``max_cloud_cover`` percent cloud, by date."""
    chosen = []
    for item in items:
        when = item.datetime or dt.datetime.fromisoformat(str(item.properties.get("start_datetime")))
        if item_tile(item) != tile or when.year != year:
            continue
        if float(item.properties.get("eo:cloud_cover", 0.0)) > max_cloud_cover:
            continue
        chosen.append(item)
    return sorted(chosen, key=lambda i: (i.datetime, i.id))


def from_catalog(catalog_path: str | Path) -> Iterable[pystac.Item]:
    """Every item of a local static STAC catalog, asset hrefs made absolute."""
    path = Path(catalog_path)
    if not path.exists():
        raise LcflowError(f"STAC catalog {path} does not exist")
    try:
        catalog = pystac.Catalog.from_file(str(path))
        items = list(catalog.get_items(recursive=True))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LcflowError(f"STAC catalog {path} (or a file it links) is not JSON: {exc}") from exc
    except (pystac.STACError, pystac.STACTypeError, KeyError, TypeError, ValueError, OSError) as exc:
        raise LcflowError(f"STAC catalog {path} cannot be read as a STAC catalog ({type(exc).__name__}: {exc})") from exc
    for item in items:
        item.make_asset_hrefs_absolute()
        yield item


def tile_query(url: str, tile: str) -> dict[str, Any]:
    """The STAC query that selects one MGRS tile, in the property the endpoint indexes."""
    if "planetarycomputer" in url:
        return {"s2:mgrs_tile": {"eq": tile}}
    return {"grid:code": {"eq": f"MGRS-{tile}"}}


def from_api(url: str, collection: str, tile: str, year: int, max_cloud_cover: float) -> Iterable[pystac.Item]:
    """Items from a STAC API search (Earth Search v1, Planetary Computer, Copernicus Data Space)."""
    from pystac_client import Client

    client = Client.open(url)
    search = client.search(
        collections=[collection], datetime=f"{year}-01-01/{year}-12-31",
        query={**tile_query(url, tile), "eo:cloud_cover": {"lte": max_cloud_cover}},
    )
    return search.items()


def run(tile: str, year: int, out: str | Path, *, catalog: str | None = None, api: str | None = None,
        collection: str = "sentinel-2-l2a", max_cloud_cover: float = 100.0) -> int:
    """Write the manifest of ``tile``/``year`` to ``out``; return the number of items."""
    mgrs.check_tile(tile)
    if bool(catalog) == bool(api):
        raise LcflowError("give exactly one of a local STAC catalog (stac.catalog) or a STAC API URL (stac.api)")
    if catalog:
        items = select(from_catalog(catalog), tile, year, max_cloud_cover)
    else:
        try:
            items = select(from_api(api, collection, tile, year, max_cloud_cover), tile, year, max_cloud_cover)
        except LcflowError:
            raise
        except Exception as exc:  # pystac-client's APIError, connection errors, timeouts
            raise LcflowError(f"STAC search of tile {tile} {year} at {api} (collection {collection}) failed: "
                              f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}") from exc
    if not items:
        where = catalog or api
        raise LcflowError(f"no Sentinel-2 item for tile {tile} in {year} (cloud cover <= {max_cloud_cover}) in {where}")
    manifest = pystac.ItemCollection(items)
    write_text(out, json.dumps(manifest.to_dict(transform_hrefs=False), indent=1))
    return len(items)


def read_manifest(path: str | Path) -> list[pystac.Item]:
    """Items of a manifest written by :func:`run`."""
    path = Path(path)
    if not path.exists():
        raise LcflowError(f"manifest {path} does not exist")
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LcflowError(f"manifest {path} is not JSON ({exc}); write it with lcflow search") from exc
    if not isinstance(data, dict) or data.get("type") != "FeatureCollection":
        raise LcflowError(f"manifest {path} is not a STAC ItemCollection (a GeoJSON FeatureCollection of items); "
                          "write it with lcflow search")
    try:
        return list(pystac.ItemCollection.from_dict(data))
    except (pystac.STACError, pystac.STACTypeError, KeyError, TypeError, ValueError) as exc:
        raise LcflowError(f"manifest {path}: an item is not a valid STAC item ({type(exc).__name__}: {exc})") from exc
