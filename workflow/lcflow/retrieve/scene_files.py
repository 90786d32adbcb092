"""The files of a tile-year's scenes as their own headers describe them, checked against their items.

Every file a cube reads is opened once before the first window (the reader keeps it open), on every path
alike: staged copies, local files, remote ones. Its header, not its item, then decides how it is read: an
item whose ``proj:shape`` or ``proj:transform`` does not describe its file (a copy decimated or cut by
someone) is read on the file's own grid with a WARNING; data coarser than both the cube and the band's
own Sentinel-2 resolution is said; a band's type and no-data value come from the file where its item does
not give them (:mod:`lcflow.retrieve.radiometry`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from affine import Affine

from lcflow.common.raster import Grid
from lcflow.errors import LcflowError
from lcflow.retrieve import radiometry, sentinel2
from lcflow.retrieve.asset_reader import FileFacts
from lcflow.retrieve.item_layout import MASK, Layout

log = logging.getLogger("lcflow.retrieve.cube")


@dataclass(frozen=True)
class SceneFiles:
    """What the headers say, for what a cube reads (a band, or :data:`MASK`): the numpy type it is read
    into, each item's no-data value, and the grid an asset is stored on where every item stores it on one
    north-up grid in the tile's CRS, as fine as the cube or coarser (read as stored); the other assets are
    warped."""

    dtypes: dict[str, np.dtype]
    item_dtypes: dict[str, list[np.dtype]]
    nodata: dict[str, np.ndarray]
    native: dict[str, Affine]


def differs_from_item(facts: FileFacts, fields: dict) -> str | None:
    """How a file's grid differs from what its item's ``proj:shape`` and ``proj:transform`` say, or None."""
    shape, transform = fields.get("proj:shape"), fields.get("proj:transform")
    said = []
    if isinstance(shape, list) and len(shape) == 2 and tuple(shape) != facts.shape:
        said.append(f"proj:shape {shape[0]} x {shape[1]} px")
    if isinstance(transform, list) and len(transform) >= 6:
        if not Affine(*transform[:6]).almost_equals(facts.transform, precision=1e-6):
            said.append(f"proj:transform at {abs(transform[0]):g} m")
    if not said:
        return None
    return (
        f"the file is {facts.shape[0]} x {facts.shape[1]} px at {abs(facts.transform.a):g} m, where its "
        f"item says {' and '.join(said)}"
    )


def survey(
    items,
    layout: Layout,
    facts: Callable[[object, str], FileFacts],
    grid: Grid,
    where: str,
) -> SceneFiles:
    """Check every file of ``items`` a cube reads (``facts(item, key)`` opens one) and say how to read it.

    Refused in one line: a band the file does not hold (a band's own asset holding several bands, a
    multi-band asset's band beyond its count), a multi-band asset that must be warped (not on a grid in
    the tile's CRS). Said: files their items do not describe, data coarser than the cube and the band.

    Args:
        items: the tile-year's items, in the cube's order.
        layout: where each band and the mask are (:mod:`lcflow.retrieve.item_layout`).
        facts: the header of an item's asset (``AssetReader.facts`` of its href).
        grid: the cube's grid.
        where: the tile-year, named in every message.
    """
    headers = {(item.id, key): facts(item, key) for item in items for key in layout.keys}
    undescribed = [
        (item.id, key, why)
        for item in items
        for key in layout.keys
        if (why := differs_from_item(headers[(item.id, key)], item.assets[key].extra_fields))
    ]
    if undescribed:
        first_id, key, why = undescribed[0]
        log.warning(
            "%s: item %s asset %s: %s; read on the file's own grid (%d of %d files so)",
            where,
            first_id,
            key,
            why,
            len(undescribed),
            len(headers),
        )
    native = _native_grids(items, layout, headers, grid)
    dtypes, item_dtypes, nodata = {}, {}, {}
    for name, source in layout.reads.items():
        for item in items:
            header = headers[(item.id, source.key)]
            if source.index > header.count:
                raise LcflowError(
                    f"{where}: item {item.id} asset {source.key} holds {header.count} band(s), where "
                    f"{name} is its band {source.index}"
                )
            if header.count > 1 and not source.shared:
                raise LcflowError(
                    f"{where}: item {item.id} asset {source.key} holds {header.count} bands, where an "
                    f"asset of one band ({name}) was expected: a multi-band asset is read by the names its "
                    "eo:bands give, or by cube.asset_bands (its bands in file order)"
                )
            if header.count > 1 and source.key not in native:
                raise LcflowError(
                    f"{where}: item {item.id} asset {source.key} holds {header.count} bands and is not on "
                    "a grid in the tile's CRS as fine as the cube or coarser: a multi-band asset is read "
                    "where it lies on such a grid; reproject it to the tile's CRS first"
                )
        kinds = [np.dtype(headers[(i.id, source.key)].dtypes[source.index - 1]) for i in items]
        dtypes[name] = np.result_type(*kinds)
        item_dtypes[name] = kinds
        nodata[name] = np.array(
            [
                radiometry.nodata(
                    items[k].assets[source.key].extra_fields,
                    source.index,
                    headers[(items[k].id, source.key)].nodata[source.index - 1],
                )
                for k in range(len(items))
            ],
            dtype=np.float64,
        )
    _say_coarse(items, layout, headers, grid, where)
    return SceneFiles(dtypes, item_dtypes, nodata, native)


def _native_grids(items, layout: Layout, headers: dict, grid: Grid) -> dict[str, Affine]:
    """Asset key -> its grid, for the assets every item stores on one north-up grid in the tile's CRS, as
    fine as ``grid`` or coarser."""
    epsg = grid.crs.to_epsg()
    grids = {}
    for key in layout.keys:
        found = {
            (headers[(i.id, key)].epsg, tuple(headers[(i.id, key)].transform)[:6]) for i in items
        }
        if len(found) != 1:
            continue
        file_epsg, t = found.pop()
        transform = Affine(*t)
        if (
            file_epsg == epsg
            and transform.b == 0
            and transform.d == 0
            and transform.e < 0
            and transform.a > grid.transform.a * 0.999
        ):
            grids[key] = transform
    return grids


def _say_coarse(items, layout: Layout, headers: dict, grid: Grid, where: str) -> None:
    """A band stored coarser than the cube and than Sentinel-2 records it: interpolated, said once a band."""
    for band, source in layout.bands.items():
        sizes = {abs(headers[(i.id, source.key)].transform.a) for i in items}
        coarse = max(sizes)
        if coarse > grid.transform.a * 1.001 and coarse > sentinel2.BAND_RESOLUTION[band] * 1.001:
            log.warning(
                "%s: band %s is stored at %g m (asset %s), coarser than the cube's %g m and Sentinel-2's "
                "%d m: interpolated, with no detail finer than %g m",
                where,
                band,
                coarse,
                source.key,
                grid.transform.a,
                sentinel2.BAND_RESOLUTION[band],
                coarse,
            )
    if MASK in layout.reads:
        key = layout.reads[MASK].key
        coarse = max(abs(headers[(i.id, key)].transform.a) for i in items)
        if coarse > max(grid.transform.a, sentinel2.BAND_RESOLUTION["SCL"]) * 1.001:
            log.warning(
                "%s: the mask (asset %s) is stored at %g m, coarser than the cube's %g m: each of its "
                "cells masks %d x %d cube pixels",
                where,
                key,
                coarse,
                grid.transform.a,
                round(coarse / grid.transform.a),
                round(coarse / grid.transform.a),
            )
