"""Where each band of an item is stored: its asset and, in a multi-band asset, which band of the file.

A catalogue stores a band as an asset of its own under a key of its style (``B02``, ``blue``,
``B02_10m``), or several bands in one file (sen2cor stacks, openEO results) named in the asset's
``eo:bands`` (or STAC 1.1 ``bands``), or in no metadata at all, where ``cube.asset_bands`` gives their
order. The mask is SCL (``cube.mask: scl``), the product's own mask asset (``asset``), or none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lcflow.errors import LcflowError
from lcflow.retrieve import mgrs, sentinel2, time_grid

#: the name the mask goes by among what a cube reads of an item
MASK = "mask"


@dataclass(frozen=True)
class Source:
    """A band's place in an item: the asset's key, the band of its file (1-based), and whether the file
    holds other bands too (a multi-band asset, named in ``eo:bands`` or ``cube.asset_bands``)."""

    key: str
    index: int = 1
    shared: bool = False


@dataclass(frozen=True)
class Layout:
    """What a cube reads of every item: each band's source, and the mask's (None: no mask)."""

    bands: dict[str, Source]
    mask: Source | None

    @property
    def reads(self) -> dict[str, Source]:
        """Every band, then the mask under :data:`MASK`."""
        return {**self.bands, **({MASK: self.mask} if self.mask else {})}

    @property
    def keys(self) -> list[str]:
        """The assets read, each once, in the order of the bands (then the mask's)."""
        return list(dict.fromkeys(s.key for s in self.reads.values()))


def _band_names(asset_fields: Mapping[str, Any]) -> list[str]:
    """The names an asset gives its file's bands, in order (``eo:bands``, or STAC 1.1 ``bands``)."""
    for field in ("eo:bands", "bands"):
        listed = asset_fields.get(field)
        if isinstance(listed, list) and listed:
            return [str((b or {}).get("name") or "") if isinstance(b, dict) else "" for b in listed]
    return []


def _same_band(name: str, band: str) -> bool:
    """``name`` (as a catalogue writes it: ``B02``, ``B2``, ``blue``) is ``band``."""
    text = name.strip().upper()
    if text == band.upper() or text == sentinel2.EARTH_SEARCH_KEYS.get(band, "").upper():
        return True
    return (
        text.startswith("B")
        and band.startswith("B")
        and text[1:].lstrip("0") == band[1:].lstrip("0")
    )


def source_of(
    assets: Mapping[str, Any], band: str, item_id: str, asset_bands: Mapping[str, Sequence[str]]
) -> Source:
    """Where ``band`` is in an item's ``assets`` (pystac Assets or their dicts): an asset of its own (by key,
    :func:`lcflow.retrieve.sentinel2.asset_keys`), a band of an asset in ``asset_bands`` (the config's
    order of a file's bands), an asset whose one band is named so, else a band of a multi-band asset named
    so (the asset of fewest bands); refused in one line that says how multi-band assets are read."""
    for key in sentinel2.asset_keys(band):
        if key in assets:
            return Source(key)
    for key, order in asset_bands.items():
        if key in assets and band in order:
            return Source(key, list(order).index(band) + 1, shared=True)
    named = []
    for key, asset in assets.items():
        fields = asset if isinstance(asset, Mapping) else asset.extra_fields
        names = _band_names(fields)
        for index, name in enumerate(names, start=1):
            if _same_band(name, band):
                named.append((len(names), key, index))
    if named:
        count, key, index = min(named)
        return Source(key, index, shared=count > 1)
    raise LcflowError(
        f"item {item_id or '?'} has no asset for band {band} (looked for "
        f"{', '.join(map(repr, sentinel2.asset_keys(band)))}, and for a band named {band} in an asset's "
        f"eo:bands; it has {', '.join(sorted(assets)) or 'none'}): a multi-band asset is read by the names "
        "its eo:bands give, or by cube.asset_bands (its bands in file order, e.g. "
        "{BOA: [B01, B02, B03, ...]})"
    )


def mask_source(assets: Mapping[str, Any], item_id: str, settings) -> Source | None:
    """The mask's source under ``settings.mask``: SCL, the product's own mask asset, or none."""
    if settings.mask == "none":
        return None
    if settings.mask == "asset":
        if settings.mask_asset not in assets:
            raise LcflowError(
                f"item {item_id} has no asset {settings.mask_asset!r} (cube.mask_asset); it has "
                f"{', '.join(sorted(assets)) or 'none'}"
            )
        return Source(settings.mask_asset)
    try:
        return source_of(assets, "SCL", item_id, settings.asset_bands)
    except LcflowError as exc:
        raise LcflowError(
            f"{exc}; products without a scene classification take cube.mask: none (composites already "
            "masked) or cube.mask: asset with cube.mask_asset (another processor's mask)"
        ) from None


def layout_of(items, tile: str, year: int, settings) -> Layout:
    """Where every item stores every band of ``settings`` and its mask, the same in each; items of another
    year or another UTM zone refused, all before any pixel is read, naming the item."""
    epsg = mgrs.tile_epsg(tile)
    years = {item.id: time_grid.item_time(item).year for item in items}
    outside = [item for item in items if years[item.id] != year]
    if outside:
        found = sorted({years[item.id] for item in outside})
        raise LcflowError(
            f"tile {tile} {year}: {len(outside)} of {len(items)} items of the manifest were acquired in "
            f"{', '.join(map(str, found))}, not {year} (the first: {outside[0].id}): give the manifest "
            f"of {year} (lcflow search --year {year})"
        )
    first = items[0]
    layout = Layout(
        {b: source_of(first.assets, b, first.id, settings.asset_bands) for b in settings.bands},
        mask_source(first.assets, first.id, settings),
    )
    for item in items:
        for band, source in layout.reads.items():
            if source.key not in item.assets:
                raise LcflowError(
                    f"tile {tile} {year}: item {item.id} has no {source.key!r} asset (band {band}, as in "
                    f"{first.id}); it has {', '.join(sorted(item.assets)) or 'none'}"
                )
        item_epsg = sentinel2.item_epsg(item.properties)
        if item_epsg is not None and item_epsg != epsg:
            raise LcflowError(
                f"tile {tile} {year}: item {item.id} is in EPSG:{item_epsg}, the tile's zone is "
                f"EPSG:{epsg}"
            )
    return layout
