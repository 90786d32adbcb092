"""What a band's digital numbers mean: the gain and offset to reflectance x 10000, and its no-data value.

Each as the item says it, never guessed:
- **Offset** (Sentinel-2's BOA_ADD_OFFSET, -1000 DN from processing baseline 04.00): Earth Search's
  ``earthsearch:boa_offset_applied`` first (true: its pixels are harmonised, whatever its
  ``raster:bands`` offset says; Element84/earth-search#9 names the flag the truth), then the asset's
  ``raster:bands`` scale and offset, then the processing baseline (``s2:processing_baseline``,
  ``processing:version``), then ``cube.boa_add_offset``; an item that records none of them is refused,
  naming that key.
- **No data**: ``raster:bands[].nodata``, else the file's nodata tag, else Sentinel-2 L2A's 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lcflow.errors import LcflowError
from lcflow.retrieve import sentinel2

#: Sentinel-2 L2A's documented no-data value (DN 0; SCL 0 "no data")
PRODUCT_NODATA = 0.0


@dataclass(frozen=True)
class Scaling:
    """``dn * gain + bias`` is reflectance x 10000; ``said`` tells where the item said so."""

    gain: float
    bias: float
    said: str


def _band_entry(fields: Mapping[str, Any], index: int) -> Mapping[str, Any]:
    """The ``raster:bands`` (or STAC 1.1 ``bands``) entry of band ``index`` (1-based) of an asset."""
    for field in ("raster:bands", "bands"):
        listed = fields.get(field)
        if (
            isinstance(listed, list)
            and len(listed) >= index
            and isinstance(listed[index - 1], dict)
        ):
            return listed[index - 1]
    return fields if "nodata" in fields or "scale" in fields else {}


def _number(value: Any, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LcflowError(f"{what} = {value!r} is not a number") from None
    return number


def _gain(scale: float) -> float:
    """reflectance x 10000 per DN; Sentinel-2's 0.0001 exactly 1."""
    gain = scale * sentinel2.QUANTIFICATION
    return 1.0 if math.isclose(gain, 1.0, rel_tol=1e-9) else gain


def scaling(
    item,
    fields: Mapping[str, Any],
    index: int,
    configured: float | None = None,
) -> Scaling:
    """How the DNs of band ``index`` of an asset (its STAC ``fields``) of ``item`` become reflectance x
    10000 (module docstring); ``configured`` is ``cube.boa_add_offset``. Refused, naming the key to set,
    where nothing says it: known before any file is opened (a stage-in refuses before it fetches)."""
    properties = item.properties
    applied = properties.get("earthsearch:boa_offset_applied")
    entry = _band_entry(fields, index)
    what = f"item {item.id} asset band {index}"
    scale = _number(entry["scale"], f"{what} raster:bands scale") if "scale" in entry else None
    if applied is True:
        return Scaling(
            _gain(scale or 1 / sentinel2.QUANTIFICATION), 0.0, "earthsearch:boa_offset_applied"
        )
    if "offset" in entry or scale is not None:
        offset = _number(entry.get("offset", 0), f"{what} raster:bands offset")
        step = scale if scale is not None else 1 / sentinel2.QUANTIFICATION
        return Scaling(_gain(step), offset * sentinel2.QUANTIFICATION, "raster:bands")
    baseline = sentinel2.processing_baseline(properties, item.id)
    if baseline is not None:
        bias = -sentinel2.BOA_ADD_OFFSET if baseline >= 4.0 else 0.0
        return Scaling(1.0, float(bias), f"processing baseline {baseline:05.2f}")
    if applied is False:
        raise LcflowError(
            f"item {item.id} says earthsearch:boa_offset_applied: false and records no processing baseline "
            "(s2:processing_baseline or processing:version): the offset to remove is unknown"
        )
    if configured is not None:
        return Scaling(1.0, float(configured), "cube.boa_add_offset")
    raise LcflowError(
        f"item {item.id} records no offset (no raster:bands scale or offset, no "
        f"{' or '.join(sentinel2.BASELINE_PROPERTIES)}, no earthsearch:boa_offset_applied): set "
        "cube.boa_add_offset, 0 for products whose offset is removed (composites, harmonised collections) "
        "or -1000 for Sentinel-2 L2A of processing baseline 04.00 and later (acquired from 25 January 2022)"
    )


def nodata(fields: Mapping[str, Any], index: int, file_nodata: float | None) -> float:
    """Band ``index``'s no-data value: ``raster:bands[].nodata``, else the file's tag, else Sentinel-2
    L2A's 0 (``nan`` as STAC writes it is NaN)."""
    entry = _band_entry(fields, index)
    if entry.get("nodata") is not None:
        value = entry["nodata"]
        if isinstance(value, str) and value.lower() in ("nan", "inf", "-inf"):
            return float(value)
        return _number(value, f"raster:bands[{index - 1}].nodata")
    if file_nodata is not None:
        return float(file_nodata)
    return PRODUCT_NODATA
