"""A scene read that failed, named: the item and asset whose pixels could not be read, and GDAL's own
words for why (odc-stac's error names no file)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lcflow.errors import LcflowError
from lcflow.retrieve import remote

if TYPE_CHECKING:
    from odc.geo.geobox import GeoBox


def read_failure(
    exc: Exception, items, keys: list[str], tile: str, year: int, window: GeoBox, sign=None
) -> LcflowError:
    """One line naming the item and asset whose read failed (URLs without credentials or query strings:
    no signatures, no tokens).

    odc-stac's exception does not say which file failed, so each asset's part of the window is read
    again, one by one, until one fails.

    Args:
        exc: the load's error.
        items: the tile-year's items, in the order they were loaded.
        keys: the asset keys that were read.
        tile: the MGRS tile, named in the message.
        year: the year, named in the message.
        window: the window whose read failed, on the cube's grid.
        sign: the URL signer the load used (None: URLs read as they are).
    """
    failed = _failing_asset(items, keys, window, sign)
    if failed is None:
        return LcflowError(
            f"tile {tile} {year}: reading the scenes failed ({type(exc).__name__}: "
            f"{first_line(str(exc))})"
        )
    item, key, error = failed
    return LcflowError(
        f"tile {tile} {year}: reading item {item.id} asset {key} ({remote.redact(item.assets[key].href)}) "
        f"failed: {first_line(_root_cause(error, exc))}"
    )


def _root_cause(error: BaseException, handled: BaseException) -> str:
    """GDAL's own words: rasterio's 'Read failed. See previous exception' wraps them as causes. The
    chain stops before ``handled``, the load's error that was being handled when this asset was re-read
    (it may be about another file)."""
    while (earlier := error.__cause__ or error.__context__) is not None and earlier is not handled:
        error = earlier
    return str(error)


def _failing_asset(items, keys: list[str], window: GeoBox, sign=None):
    """(item, asset key, error) of the first asset whose pixels in ``window`` cannot be read, or None."""
    import rasterio
    from rasterio.warp import transform_bounds
    from rasterio.windows import from_bounds

    bounds = window.boundingbox
    for item in items:
        for key in keys:
            href = item.assets[key].href
            try:
                with rasterio.open(sign(href) if sign else href) as src:
                    left, bottom, right, top = transform_bounds(str(window.crs), src.crs, *bounds)
                    win = (
                        from_bounds(left, bottom, right, top, src.transform)
                        .round_offsets()
                        .round_lengths()
                    )
                    src.read(1, window=win, boundless=True)
            except Exception as error:  # the same errors odc-stac met, now with their file
                return item, key, error
    return None


def first_line(text: str) -> str:
    """A message's first line, without credentials or query strings, at most 300 characters."""
    return remote.redact((text.strip().splitlines() or [""])[0])[:300]
