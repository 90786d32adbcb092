"""Reading scenes over the network: the GDAL settings, URL signing and what an error may show.

Every read of a scene (the cube's windows, the re-read that names a failing asset) goes through the
GDAL options built here, so timeouts, retries with back-off, the block cache and the number of reading
threads are set in one place, from the ``stac`` and ``cube`` sections of the config.
"""

import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lcflow.defaults import default
from lcflow.errors import LcflowError

#: hosts whose asset URLs must be signed before reading (Planetary Computer's blob storage)
PLANETARY_COMPUTER_HOSTS = (".blob.core.windows.net",)
PLANETARY_COMPUTER_API = "planetarycomputer.microsoft.com"
#: Copernicus Data Space serves its assets from this S3 endpoint (path-style, credentials from the
#: environment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)
CDSE_S3_ENDPOINT = "eodata.dataspace.copernicus.eu"
CDSE_API = "dataspace.copernicus.eu"


@dataclass(frozen=True)
class Network:
    """How remote assets are read. GDAL retries 429 and 5xx answers and timeouts, waiting
    ``retry_delay_s`` first and about twice as long after each further failure."""

    timeout_s: float = float(default("stac.http.timeout_s"))
    connect_timeout_s: float = 15.0
    retries: int = default("stac.http.retries")
    retry_delay_s: float = float(default("stac.http.retry_delay_s"))
    threads: int = default("cube.read_threads")
    s3_endpoint: str | None = None

    def gdal_options(self) -> dict[str, str]:
        """GDAL configuration options for every remote read (the raster block cache is bounded for every
        lcflow process: ``lcflow.GDAL_CACHE_MB``)."""
        options = {
            # a COG is one file: never list its folder (one request saved per file, no 403 on S3)
            "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
            "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".tif,.tiff,.TIF,.TIFF,.jp2,.JP2",
            "GDAL_HTTP_TIMEOUT": str(int(round(self.timeout_s))),
            "GDAL_HTTP_CONNECTTIMEOUT": str(int(round(self.connect_timeout_s))),
            "GDAL_HTTP_MAX_RETRY": str(self.retries),
            "GDAL_HTTP_RETRY_DELAY": f"{self.retry_delay_s:g}",
            "GDAL_HTTP_MERGE_CONSECUTIVE_RANGES": "YES",
            "GDAL_HTTP_MULTIPLEX": "YES",
            # no VSI_CACHE: it holds up to its size per open file, and the cube keeps every asset of the
            # year open; decoded tiles sit in GDAL's block cache and /vsicurl keeps one bounded cache of
            # recent byte ranges for all files
            "VSI_CACHE": "FALSE",
        }
        if self.s3_endpoint:
            options.update(AWS_S3_ENDPOINT=self.s3_endpoint, AWS_VIRTUAL_HOSTING="FALSE", AWS_HTTPS="YES")
        return options


def is_url(location: str) -> bool:
    """An http(s) location (read over the network when used), not a local path."""
    return str(location).startswith(("http://", "https://"))


@contextmanager
def gdal_env(network: Network) -> Iterator[None]:
    """The options for rasterio in this thread and for odc-stac's reading threads."""
    import odc.stac
    import rasterio

    options = network.gdal_options()
    odc.stac.configure_rio(**options)
    with rasterio.Env(**options):
        yield


def _planetary_computer_signer() -> Callable[[str], str]:
    try:
        import planetary_computer
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise LcflowError("Planetary Computer assets must be signed: install the planetary-computer package") from exc
    return planetary_computer.sign


#: signing method -> a factory of the function that turns an asset URL into one that can be read
SIGNERS: dict[str, Callable[[], Callable[[str], str]]] = {"planetary-computer": _planetary_computer_signer}
SIGNING_CHOICES = ("auto", "none", *SIGNERS)


def needs_signing(items: Iterable[Any]) -> str:
    """The signing an item list needs, judged from where its assets and links point."""
    for item in items:
        hrefs = [a.href for a in item.assets.values()] + [link.get_target_str() for link in item.links]
        if any(any(h in str(href) for h in PLANETARY_COMPUTER_HOSTS) or PLANETARY_COMPUTER_API in str(href)
               for href in hrefs):
            return "planetary-computer"
    return "none"


def signer(signing: str, items: Iterable[Any]) -> Callable[[str], str] | None:
    """The URL signer for ``signing`` (``auto``: from the items), or None when URLs are read as they are.

    Signatures expire, so URLs are signed as they are read, never stored in the manifest.
    """
    if signing not in SIGNING_CHOICES:
        raise LcflowError(f"unknown signing {signing!r}; choose one of {', '.join(SIGNING_CHOICES)}")
    method = needs_signing(items) if signing == "auto" else signing
    return None if method == "none" else SIGNERS[method]()


def s3_endpoint(items: Iterable[Any]) -> str | None:
    """Copernicus Data Space items name s3://eodata/ assets served by its own S3 endpoint."""
    for item in items:
        if any(str(a.href).startswith("s3://eodata/") for a in item.assets.values()):
            return CDSE_S3_ENDPOINT
    return None


_URL = re.compile(r"([a-z][a-z0-9+.-]*://)(?:[^/@\s'\"]+@)?([^\s?'\",]*)(\?[^\s'\",]*)?", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with every URL's credentials (user:password@) and query string (signatures, tokens) cut."""
    return _URL.sub(lambda m: m.group(1) + m.group(2), text)
