"""Sentinel-2 L2A facts: bands, resolutions, catalogue asset keys, SCL classes, baseline harmonisation."""

from collections.abc import Mapping
from typing import Any

from lcflow.errors import LcflowError
from lcflow.retrieve.indices import INDICES

#: band -> native resolution in metres
BAND_RESOLUTION: dict[str, int] = {
    "B01": 60, "B02": 10, "B03": 10, "B04": 10, "B05": 20, "B06": 20, "B07": 20,
    "B08": 10, "B8A": 20, "B09": 60, "B11": 20, "B12": 20, "SCL": 20,
}
REFLECTANCE_BANDS = tuple(b for b in BAND_RESOLUTION if b != "SCL")

#: spectral indices a cube or a samples table may carry beside (or instead of) the bands, e.g. NDVI only
SPECTRAL_INDICES = tuple(INDICES)

#: every feature name of a samples table, in the order its columns are read
FEATURES = REFLECTANCE_BANDS + SPECTRAL_INDICES

#: Earth Search v1 (element84) lower-case asset keys
EARTH_SEARCH_KEYS: dict[str, str] = {
    "B01": "coastal", "B02": "blue", "B03": "green", "B04": "red", "B05": "rededge1",
    "B06": "rededge2", "B07": "rededge3", "B08": "nir", "B8A": "nir08", "B09": "nir09",
    "B11": "swir16", "B12": "swir22", "SCL": "scl",
}

SCL_CLASSES: dict[int, str] = {
    0: "no data", 1: "saturated or defective", 2: "dark area pixels", 3: "cloud shadows",
    4: "vegetation", 5: "not vegetated", 6: "water", 7: "unclassified",
    8: "cloud medium probability", 9: "cloud high probability", 10: "thin cirrus", 11: "snow or ice",
}

#: Digital numbers are reflectance x 10000; from baseline 04.00 they carry +1000.
QUANTIFICATION = 10000.0
BOA_ADD_OFFSET = 1000


def check_bands(bands: list[str]) -> list[str]:
    """Refuse names that are not Sentinel-2 reflectance bands."""
    unknown = [b for b in bands if b not in REFLECTANCE_BANDS]
    if unknown:
        raise LcflowError(f"unknown Sentinel-2 band(s) {unknown}; known: {list(REFLECTANCE_BANDS)}")
    return list(bands)


def asset_keys(band: str) -> tuple[str, ...]:
    """The asset keys ``band`` goes by: band-named (``B02``, Planetary Computer), Earth Search v1
    (``blue``), lower case, and at its native resolution (``B02_10m``, Copernicus Data Space)."""
    return (band, EARTH_SEARCH_KEYS[band], band.lower(), f"{band}_{BAND_RESOLUTION[band]}m")


def asset_key(assets: Mapping[str, Any], band: str, item_id: str = "") -> str:
    """Asset key of ``band`` in an item, under any of :func:`asset_keys`."""
    for key in asset_keys(band):
        if key in assets:
            return key
    which = f"item {item_id}" if item_id else "item"
    raise LcflowError(f"{which} has no asset for band {band} (looked for {', '.join(map(repr, asset_keys(band)))}; "
                      f"it has {', '.join(sorted(assets)) or 'none'})")


def boa_offset(properties: Mapping[str, Any]) -> int:
    """The DN offset still present in an item's pixels, to subtract once.

    Baseline >= 04.00 adds 1000 to every reflectance DN; catalogues that already removed it say so
    with ``earthsearch:boa_offset_applied: true``.
    """
    baseline = properties.get("s2:processing_baseline")
    if baseline is None:
        return 0
    try:
        major = float(baseline)
    except (TypeError, ValueError) as exc:
        raise LcflowError(f"unreadable s2:processing_baseline {baseline!r}") from exc
    if major < 4.0:
        return 0
    if properties.get("earthsearch:boa_offset_applied") is True:
        return 0
    return BOA_ADD_OFFSET


def item_epsg(properties: Mapping[str, Any]) -> int | None:
    """EPSG code of an item's pixels: ``proj:epsg`` (projection extension 1.x) or ``proj:code`` (2.x)."""
    if properties.get("proj:epsg") is not None:
        return int(properties["proj:epsg"])
    code = str(properties.get("proj:code") or "")
    return int(code.split(":", 1)[1]) if code.upper().startswith("EPSG:") else None
