"""Sentinel-2 L2A facts: bands, resolutions, catalogue asset keys, SCL classes, baseline harmonisation."""

import datetime as dt
from collections.abc import Mapping
from typing import Any

from lcflow.errors import LcflowError
from lcflow.retrieve.indices import INDICES

#: band -> native resolution in metres
BAND_RESOLUTION: dict[str, int] = {
    "B01": 60,
    "B02": 10,
    "B03": 10,
    "B04": 10,
    "B05": 20,
    "B06": 20,
    "B07": 20,
    "B08": 10,
    "B8A": 20,
    "B09": 60,
    "B11": 20,
    "B12": 20,
    "SCL": 20,
}
REFLECTANCE_BANDS = tuple(b for b in BAND_RESOLUTION if b != "SCL")

#: spectral indices a cube or a samples table may carry beside (or instead of) the bands, e.g. NDVI only
SPECTRAL_INDICES = tuple(INDICES)

#: every feature name of a samples table, in the order its columns are read
FEATURES = REFLECTANCE_BANDS + SPECTRAL_INDICES

#: Earth Search v1 (element84) lower-case asset keys
EARTH_SEARCH_KEYS: dict[str, str] = {
    "B01": "coastal",
    "B02": "blue",
    "B03": "green",
    "B04": "red",
    "B05": "rededge1",
    "B06": "rededge2",
    "B07": "rededge3",
    "B08": "nir",
    "B8A": "nir08",
    "B09": "nir09",
    "B11": "swir16",
    "B12": "swir22",
    "SCL": "scl",
}

SCL_CLASSES: dict[int, str] = {
    0: "no data",
    1: "saturated or defective",
    2: "dark area pixels",
    3: "cloud shadows",
    4: "vegetation",
    5: "not vegetated",
    6: "water",
    7: "unclassified",
    8: "cloud medium probability",
    9: "cloud high probability",
    10: "thin cirrus",
    11: "snow or ice",
}

#: Digital numbers are reflectance x 10000; from baseline 04.00 they carry +1000 (BOA_ADD_OFFSET -1000)
QUANTIFICATION = 10000.0
BOA_ADD_OFFSET = 1000


def check_bands(bands: list[str]) -> list[str]:
    """Refuse names that are not Sentinel-2 reflectance bands."""
    unknown = [b for b in bands if b not in REFLECTANCE_BANDS]
    if unknown:
        raise LcflowError(f"unknown Sentinel-2 band(s) {unknown}; known: {list(REFLECTANCE_BANDS)}")
    repeated = sorted({b for b in bands if list(bands).count(b) > 1})
    if repeated:
        raise LcflowError(
            f"band(s) {', '.join(repeated)} given more than once in {', '.join(bands)}: name each once"
        )
    return list(bands)


def asset_keys(band: str) -> tuple[str, ...]:
    """The asset keys ``band`` goes by: band-named (``B02``, Planetary Computer), Earth Search v1
    (``blue``), lower case, and at its native resolution (``B02_10m``, Copernicus Data Space)."""
    return tuple(
        dict.fromkeys(
            (band, EARTH_SEARCH_KEYS[band], band.lower(), f"{band}_{BAND_RESOLUTION[band]}m")
        )
    )


def asset_key(assets: Mapping[str, Any], band: str, item_id: str = "") -> str:
    """Asset key of ``band`` in an item, under any of :func:`asset_keys`."""
    for key in asset_keys(band):
        if key in assets:
            return key
    which = f"item {item_id}" if item_id else "item"
    raise LcflowError(
        f"{which} has no asset for band {band} (looked for {', '.join(map(repr, asset_keys(band)))}; "
        f"it has {', '.join(sorted(assets)) or 'none'})"
    )


#: the day processing baseline 04.00, and with it the +1000 offset, reached every new product
BASELINE_04_FROM = dt.date(2022, 1, 25)
#: the properties catalogues record the processing baseline in: Earth Search and Planetary Computer, the
#: processing extension (Copernicus Data Space)
BASELINE_PROPERTIES = ("s2:processing_baseline", "processing:version")


def processing_baseline(properties: Mapping[str, Any], item_id: str = "") -> float | None:
    """The processing baseline an item records (``05.09``, ``5.9``, ``N0509`` -> 5.09), None where it
    records none; a value that is none of these is refused, naming the property."""
    for key in BASELINE_PROPERTIES:
        value = properties.get(key)
        if value is None:
            continue
        text = str(value).strip().upper()
        if len(text) == 5 and text[0] == "N" and text[1:].isdigit():  # a product name's N0509
            text = f"{text[1:3]}.{text[3:]}"
        try:
            return float(text)
        except ValueError:
            raise LcflowError(
                f"item {item_id or '?'}: unreadable {key} {value!r} (a processing baseline such as "
                "05.09)"
            ) from None
    return None


def utc(time: dt.datetime) -> dt.datetime:
    """A naive UTC time (as numpy's datetime64 wants it) from an item's time, aware or naive UTC: an item
    of 2018-12-31T23:30:00-01:00 is of 2019, whatever zone its catalogue writes."""
    return time.astimezone(dt.timezone.utc).replace(tzinfo=None) if time.tzinfo else time


def item_epsg(properties: Mapping[str, Any]) -> int | None:
    """EPSG code of an item's pixels: ``proj:epsg`` (projection extension 1.x) or ``proj:code`` (2.x)."""
    if properties.get("proj:epsg") is not None:
        return int(properties["proj:epsg"])
    code = str(properties.get("proj:code") or "")
    return int(code.split(":", 1)[1]) if code.upper().startswith("EPSG:") else None
