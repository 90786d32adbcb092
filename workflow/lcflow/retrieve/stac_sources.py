"""Where Sentinel-2 items come from: a static STAC catalogue (a path or URL, walked child by child) or a STAC
API searched by the tile's property or footprint (:mod:`lcflow.retrieve.search` selects among them)."""

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pystac

from lcflow.errors import LcflowError
from lcflow.retrieve import mgrs
from lcflow.retrieve.remote import CREDENTIAL_SOURCES, catalogue_io, is_url, redact


def from_catalog(catalog: str | Path, read: list[str] | None = None) -> Iterable[pystac.Item]:
    """Every item of a static STAC catalog (a local path or an http(s) URL), asset hrefs made absolute.
    A remote catalogue's links and assets must be remote: it may not make lcflow read local files.
    ``read``, given, gets the local files of the catalogue."""
    location = str(catalog)
    if not is_url(location) and not Path(location).exists():
        raise LcflowError(f"STAC catalog {location} does not exist")
    shown = redact(location)
    reader = catalogue_io(location)
    try:
        items = list(_items(pystac.Catalog.from_file(location, stac_io=reader), shown))
        if read is not None:
            read += reader.files
    except LcflowError:
        raise
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LcflowError(f"STAC catalog {shown} (or a file it links) is not JSON: {exc}") from exc
    except (
        Exception
    ) as exc:  # pystac wraps a failed request in a bare Exception ("Could not read uri")
        answer = _http_answer(exc)
        if answer is None and not isinstance(
            exc, (pystac.STACError, pystac.STACTypeError, KeyError, TypeError, ValueError, OSError)
        ):
            raise
        if answer is not None:
            raise LcflowError(f"STAC catalog {shown}: {answer}") from exc
        # pystac wraps what its reader refused
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, LcflowError):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise cause from None
        raise LcflowError(
            f"STAC catalog {shown} cannot be read as a STAC catalog "
            f"({type(exc).__name__}: {redact(str(exc))})"
        ) from exc
    for item in items:
        item.make_asset_hrefs_absolute()
        if is_url(location):
            local = [
                key
                for key, asset in item.assets.items()
                if "://" not in str(asset.href) or str(asset.href).startswith("file:")
            ]
            if local:
                raise LcflowError(
                    f"STAC catalog {shown}: item {item.id} asset {local[0]} is the local file "
                    f"{redact(str(item.assets[local[0]].href))}: a remote catalogue's assets must be remote"
                )
        yield item


def _items(root: pystac.Catalog, shown: str) -> Iterable[pystac.Item]:
    """Every item under ``root``, each catalogue walked once: a child that links back to a catalogue above
    it (a cycle) is refused, naming both, where pystac's own walk would recurse until Python stops it."""
    seen: set[str] = set()
    stack = [root]
    while stack:
        catalog = stack.pop()
        key = catalog.get_self_href() or catalog.id
        if key in seen:
            raise LcflowError(
                f"STAC catalog {shown}: its links run in a cycle ({redact(key)} is reached again as a "
                "child of a catalogue below it); mend the link"
            )
        seen.add(key)
        yield from catalog.get_items()
        stack.extend(reversed(list(catalog.get_children())))


def _http_answer(exc: BaseException) -> str | None:
    """What a server answered to a failed catalogue request, said for a user (a 401 or 403 asks for
    credentials), from the exception or its causes; None where no request failed."""
    import re
    import urllib.error

    def requested(e: BaseException) -> bool:
        """urllib's errors, and urllib3's (pystac reads with either)."""
        return isinstance(e, urllib.error.URLError) or type(e).__module__.startswith("urllib3")

    found: BaseException | None = exc
    while found is not None and not requested(found):
        found = found.__cause__ or found.__context__
    if found is None:
        return None
    exc = found
    if not isinstance(exc, urllib.error.URLError):  # urllib3: a connection that failed, retried
        why = re.search(r"\[Errno -?\d+\] ([^\"')]+)", str(getattr(exc, "reason", exc)))
        return f"cannot be reached ({why.group(1) if why else type(exc).__name__})"
    if isinstance(exc, urllib.error.HTTPError):
        said = f"{redact(exc.url or '')} answers HTTP {exc.code} {exc.reason}"
        if exc.code in (401, 403):
            said += (
                "; it wants credentials, which lcflow sends to the catalogue's host: give them as "
                + ", ".join(CREDENTIAL_SOURCES[:-1])
                + f" or {CREDENTIAL_SOURCES[-1]}"
            )
        return said
    return f"cannot be reached ({redact(str(exc.reason))})"


def tile_query(url: str, tile: str) -> dict[str, Any] | None:
    """The STAC query that selects one MGRS tile, in the property the endpoint indexes (None where the
    endpoint's query support is not known: the search then goes by the tile's footprint)."""
    if "planetarycomputer" in url:
        return {"s2:mgrs_tile": {"eq": tile}}
    if "earth-search" in url:
        return {"grid:code": {"eq": f"MGRS-{tile}"}}
    return None


def tile_footprint(tile: str) -> dict[str, Any]:
    """The tile's square as a GeoJSON polygon in longitude/latitude (edges densified, so the lines stay
    on the UTM square). Not its centre: a tile at the edge of an orbit's swath has scenes that do not
    reach its centre. Neighbouring tiles' items that overlap it are dropped by :func:`select`."""
    from rasterio.warp import transform_geom
    from shapely.geometry import box, mapping

    xmin, ymin, xmax, ymax = mgrs.tile_bounds(tile)
    square = box(xmin, ymin, xmax, ymax).segmentize((xmax - xmin) / 10)
    return transform_geom(f"EPSG:{mgrs.tile_epsg(tile)}", "EPSG:4326", mapping(square))


def from_api(
    url: str, collection: str, tile: str, year: int, max_cloud_cover: float
) -> Iterable[pystac.Item]:
    """Items from a STAC API search (Earth Search v1, Planetary Computer, Copernicus Data Space, any
    other STAC API by the tile's footprint).

    Args:
        url: the API's root.
        collection: the Sentinel-2 L2A collection's id at that API.
        tile: the MGRS tile, searched by its property where the API has one, else by footprint.
        year: the UTC calendar year of acquisitions.
        max_cloud_cover: items of more cloud (``eo:cloud_cover``, percent) are not asked for.
    """
    from pystac_client import Client

    client = Client.open(url)
    query = tile_query(url, tile)
    where = (
        {"query": {**query, "eo:cloud_cover": {"lte": max_cloud_cover}}}
        if query
        else {"intersects": tile_footprint(tile)}
    )
    # the year in UTC, its last day whole
    search = client.search(
        collections=[collection],
        datetime=f"{year}-01-01T00:00:00Z/{year}-12-31T23:59:59.999999Z",
        **where,
    )
    return search.items()
