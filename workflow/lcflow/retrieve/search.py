"""Find the Sentinel-2 L2A items of one MGRS tile and year, from a STAC API or a static catalog.

The result is a manifest (a STAC ItemCollection, ``items.json``) with absolute asset hrefs, so later
stages never search again and a rerun of ``cube`` reads exactly the same scenes. It also records where
the items came from and which duplicate acquisitions were dropped.
"""

import json
import logging
from collections.abc import Iterable
from pathlib import Path

import pystac

from lcflow.common import path_guard
from lcflow.common.atomic import write_text
from lcflow.errors import LcflowError
from lcflow.retrieve import mgrs
from lcflow.retrieve.remote import (
    clean_href,
    redact,
    refuse_secrets,
)
from lcflow.retrieve.stac_sources import from_api, from_catalog
from lcflow.retrieve.time_grid import item_interval, item_time

log = logging.getLogger("lcflow.retrieve.search")
#: acquisitions of one tile closer in time than this are the same acquisition
SAME_ACQUISITION_S = 60.0


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


def select(
    items: Iterable[pystac.Item], tile: str, year: int, max_cloud_cover: float = 100.0
) -> list[pystac.Item]:
    """Items of ``tile`` acquired in ``year`` (UTC, as the cube counts them; a composite by its
    ``start_datetime`` where its ``datetime`` is null) with at most ``max_cloud_cover`` percent cloud, by
    date."""
    chosen = []
    for item in items:
        if item_tile(item) != tile or item_time(item).year != year:
            continue
        if float(item.properties.get("eo:cloud_cover", 0.0)) > max_cloud_cover:
            continue
        chosen.append(item)
    return sorted(chosen, key=lambda i: (item_time(i), i.id))


def baseline(item: pystac.Item) -> tuple[int, ...]:
    """Processing baseline as a comparable tuple (``05.09`` -> (5, 9)); () when the item has none."""
    value = item.properties.get("s2:processing_baseline")
    try:
        return tuple(int(part) for part in str(value).split(".")) if value is not None else ()
    except ValueError:
        return ()


def _newest_first(item: pystac.Item) -> tuple:
    p = item.properties
    return (
        baseline(item),
        str(p.get("s2:generation_time") or ""),
        str(p.get("updated") or p.get("created") or ""),
        item.id,
    )


def dedupe(items: list[pystac.Item]) -> tuple[list[pystac.Item], list[dict[str, str]]]:
    """Keep one item per acquisition (tile and sensing time): the newest processing baseline, then the
    newest generation. Catalogues list reprocessed scenes beside the originals; a cube must not count
    one acquisition twice. Returns the kept items (by date) and a record of each dropped one."""
    kept: list[pystac.Item] = []
    dropped: list[dict[str, str]] = []
    by_tile: dict[str | None, list[pystac.Item]] = {}
    for item in items:
        by_tile.setdefault(item_tile(item), []).append(item)
    for group_items in by_tile.values():
        group_items.sort(key=item_time)
        groups: list[list[pystac.Item]] = []
        for item in group_items:
            if (
                groups
                and (item_time(item) - item_time(groups[-1][0])).total_seconds()
                <= SAME_ACQUISITION_S
                and _same_span(item, groups[-1][0])
            ):
                groups[-1].append(item)
            else:
                groups.append([item])
        for group in groups:
            ordered = sorted(group, key=_newest_first, reverse=True)
            kept.append(ordered[0])
            for other in ordered[1:]:
                dropped.append(
                    {
                        "id": other.id,
                        "kept": ordered[0].id,
                        "baseline": str(other.properties.get("s2:processing_baseline")),
                        "kept_baseline": str(ordered[0].properties.get("s2:processing_baseline")),
                    }
                )
    for d in dropped:
        log.info(
            "dropped %s: the same acquisition as %s (baseline %s, kept %s)",
            d["id"],
            d["kept"],
            d["baseline"],
            d["kept_baseline"],
        )
    return sorted(kept, key=lambda i: (item_time(i), i.id)), dropped


def _same_span(item: pystac.Item, other: pystac.Item) -> bool:
    """Two items cover the same time: acquisitions of one instant, or composites of one interval."""
    (a0, a1), (b0, b1) = item_interval(item), item_interval(other)
    return (a1 - a0) == (b1 - b0)


def product_level(item: pystac.Item) -> str | None:
    """The processing level an item says it is (``2A``, ``1C``), from its product type or level."""
    p = item.properties
    for key in ("s2:product_type", "product:type", "processing:level"):
        value = str(p.get(key) or "").upper()
        for level in ("2A", "1C"):
            if value.endswith(level):
                return level
    return None


def wanted_level(collection: str) -> str | None:
    """The processing level a collection's name promises (``sentinel-2-l2a`` -> ``2A``)."""
    name = collection.lower()
    return "2A" if "l2a" in name else "1C" if "l1c" in name else None


def other_collection(item: pystac.Item, collection: str) -> str | None:
    """Why a static catalogue's item is not of ``collection`` (its collection, or for an item without one
    its product type), or None where it is."""
    if item.collection_id and item.collection_id != collection:
        return f"collection {item.collection_id}, not {collection}"
    level, found = wanted_level(collection), product_level(item)
    if level and found and found != level:
        return f"product type L{found}, not {collection}"
    return None


def run(
    tile: str,
    year: int,
    out: str | Path,
    *,
    catalog: str | None = None,
    api: str | None = None,
    collection: str = "sentinel-2-l2a",
    max_cloud_cover: float = 100.0,
) -> int:
    """Write the manifest of ``tile``/``year`` to ``out``; return the number of items.

    Args:
        tile: the MGRS tile.
        year: the UTC calendar year.
        out: the manifest to write, an ItemCollection.
        catalog: a static STAC catalogue (a path or URL); or
        api: a STAC API's root.
        collection: the collection's id at the API.
        max_cloud_cover: items of more cloud (percent) are left out.
    """
    mgrs.check_tile(tile)
    if bool(catalog) == bool(api):
        raise LcflowError(
            "give exactly one of a local STAC catalog (stac.catalog) or a STAC API URL (stac.api)"
        )
    refuse_secrets(str(catalog or api), "STAC catalog" if catalog else "STAC API")
    if catalog:
        items, other = _from_catalog(catalog, tile, year, collection, max_cloud_cover, out)
    else:
        items, other = _from_api(str(api), tile, year, collection, max_cloud_cover), []
    where = redact(str(catalog or api))
    if other:
        log.warning(
            "tile %s %s: %d item(s) of the catalogue left out, not of collection %s: %s",
            tile,
            year,
            len(other),
            collection,
            "; ".join(f"{d['id']} ({d['reason']})" for d in other[:5]),
        )
    if not items:
        left_out = (
            f"; {len(other)} item(s) of other collections or product types left out"
            if other
            else ""
        )
        raise LcflowError(
            f"no Sentinel-2 item for tile {tile} in {year} (cloud cover <= {max_cloud_cover}) in "
            f"{where}{left_out}"
        )
    items, dropped = dedupe(items)
    cleaned = _without_credentials(items)
    if cleaned:
        log.warning(
            "tile %s %s: %d href(s) carried a user name, password or query string, which the manifest leaves "
            "out: give credentials as GDAL_HTTP_USERPWD, GDAL_HTTP_HEADERS or in ~/.netrc",
            tile,
            year,
            cleaned,
        )
    source = {"catalog": where} if catalog else {"api": where, "collection": collection}
    manifest = pystac.ItemCollection(
        items,
        extra_fields={
            "lcflow:source": {
                **source,
                "tile": tile,
                "year": year,
                "max_cloud_cover": max_cloud_cover,
            },
            "lcflow:dropped": dropped + other,
        },
    )
    write_text(out, json.dumps(manifest.to_dict(transform_hrefs=False), indent=1))
    return len(items)


def _from_catalog(
    catalog: str, tile: str, year: int, collection: str, max_cloud_cover: float, out: str | Path
) -> tuple[list[pystac.Item], list[dict[str, str]]]:
    """The catalogue's items of the tile-year, and those left out for being of another collection; no
    catalogue file read may be ``out``."""
    read: list[str] = []
    items = select(from_catalog(catalog, read), tile, year, max_cloud_cover)
    path_guard.check(
        [
            path_guard.Named("--out", str(out), path_guard.OUTPUT_FILE),
            *(path_guard.Named("catalogue file", f, path_guard.INPUT_FILE) for f in read),
        ]
    )
    other = [{"id": i.id, "reason": why} for i in items if (why := other_collection(i, collection))]
    return [i for i in items if not other_collection(i, collection)], other


def _from_api(
    api: str, tile: str, year: int, collection: str, max_cloud_cover: float
) -> list[pystac.Item]:
    """The API's items of the tile-year; a failed search in one line, naming the API (never its secrets)."""
    try:
        return select(
            from_api(api, collection, tile, year, max_cloud_cover), tile, year, max_cloud_cover
        )
    except LcflowError:
        raise
    except Exception as exc:  # pystac-client's APIError, connection errors, timeouts
        text = redact(str(exc)).strip()
        raise LcflowError(
            f"STAC search of tile {tile} {year} at {redact(api)} (collection {collection}) failed: "
            f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"
        ) from exc


def _without_credentials(items: list[pystac.Item]) -> int:
    """Cut user-info and query strings from every asset and link href of ``items``; how many were cut."""
    changed = 0
    for item in items:
        for asset in item.assets.values():
            clean = clean_href(asset.href)
            changed += clean != asset.href
            asset.href = clean
        for link in item.links:
            if isinstance(link.target, str):
                clean = clean_href(link.target)
                changed += clean != link.target
                link.target = clean
    return changed


def manifest_source(path: str | Path) -> str | None:
    """Where a manifest's items came from (the catalogue or STAC API it names, without secrets), if it says."""
    try:
        source = json.loads(Path(path).read_text()).get("lcflow:source") or {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None
    return source.get("catalog") or source.get("api") if isinstance(source, dict) else None


def read_manifest(path: str | Path) -> list[pystac.Item]:
    """Items of a manifest written by :func:`run`."""
    path = Path(path)
    if not path.exists():
        raise LcflowError(f"manifest {path} does not exist")
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LcflowError(
            f"manifest {path} is not JSON ({exc}); write it with lcflow search"
        ) from exc
    if not isinstance(data, dict) or data.get("type") != "FeatureCollection":
        raise LcflowError(
            f"manifest {path} is not a STAC ItemCollection (a GeoJSON FeatureCollection of items); "
            "write it with lcflow search"
        )
    try:
        return list(pystac.ItemCollection.from_dict(data))
    except (pystac.STACError, pystac.STACTypeError, KeyError, TypeError, ValueError) as exc:
        raise LcflowError(
            f"manifest {path}: an item is not a valid STAC item ({type(exc).__name__}: {exc})"
        ) from exc
