"""Reading scenes over the network: the GDAL settings, URL signing and what an error may show.

Every read of a scene (the cube's windows, the re-read that names a failing asset) goes through the
GDAL options built here, so timeouts, retries with back-off, the block cache and the number of reading
threads are set in one place, from the ``stac`` and ``cube`` sections of the config.
"""

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
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
    ``retry_delay_s`` first and about twice as long after each further failure; URLs are signed as they
    are read where ``signing`` (or, for ``auto``, the catalogue) asks for it."""

    timeout_s: float = float(default("stac.http.timeout_s"))
    connect_timeout_s: float = 15.0
    retries: int = default("stac.http.retries")
    retry_delay_s: float = float(default("stac.http.retry_delay_s"))
    s3_endpoint: str | None = None
    signing: str = default("stac.signing")

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
            options.update(
                AWS_S3_ENDPOINT=self.s3_endpoint, AWS_VIRTUAL_HOSTING="FALSE", AWS_HTTPS="YES"
            )
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
        raise LcflowError(
            "Planetary Computer assets must be signed: install the planetary-computer package"
        ) from exc
    return planetary_computer.sign


#: signing method -> a factory of the function that turns an asset URL into one that can be read
SIGNERS: dict[str, Callable[[], Callable[[str], str]]] = {
    "planetary-computer": _planetary_computer_signer
}
SIGNING_CHOICES = ("auto", "none", *SIGNERS)


def needs_signing(items: Iterable[Any]) -> str:
    """The signing an item list needs, judged from where its assets and links point."""
    for item in items:
        hrefs = [a.href for a in item.assets.values()] + [
            link.get_target_str() for link in item.links
        ]
        if any(
            any(h in str(href) for h in PLANETARY_COMPUTER_HOSTS)
            or PLANETARY_COMPUTER_API in str(href)
            for href in hrefs
        ):
            return "planetary-computer"
    return "none"


def signer(signing: str, items: Iterable[Any]) -> Callable[[str], str] | None:
    """The URL signer for ``signing`` (``auto``: from the items), or None when URLs are read as they are.

    Signatures expire, so URLs are signed as they are read, never stored in the manifest.
    """
    if signing not in SIGNING_CHOICES:
        raise LcflowError(
            f"unknown signing {signing!r}; choose one of {', '.join(SIGNING_CHOICES)}"
        )
    method = needs_signing(items) if signing == "auto" else signing
    return None if method == "none" else SIGNERS[method]()


def s3_endpoint(items: Iterable[Any]) -> str | None:
    """Copernicus Data Space items name s3://eodata/ assets served by its own S3 endpoint."""
    for item in items:
        if any(str(a.href).startswith("s3://eodata/") for a in item.assets.values()):
            return CDSE_S3_ENDPOINT
    return None


_URL = re.compile(
    r"([a-z][a-z0-9+.-]*://)(?:[^/@\s'\"]+@)?([^\s?'\",]*)(\?[^\s'\",]*)?", re.IGNORECASE
)


def redact(text: str) -> str:
    """``text`` with every URL's credentials (user:password@) and query string (signatures, tokens) cut."""
    return _URL.sub(lambda m: m.group(1) + m.group(2), text)


#: where credentials for a catalogue and its scenes come from: the variables GDAL reads for every scene
#: it opens, which lcflow reads too for a catalogue's own requests (to the catalogue's host only)
CREDENTIAL_SOURCES = (
    "GDAL_HTTP_USERPWD=user:password",
    "GDAL_HTTP_HEADERS='Authorization: Bearer TOKEN'",
    "a machine entry in ~/.netrc",
)
#: query parameters that carry a secret: tokens, signatures, keys, passwords, Azure SAS and S3 pre-signing
_SECRET_PARAMETER = re.compile(
    r"token|sig|secret|pass|pwd|key|auth|credential|session|^s[etpvrk]$|^x-amz-", re.IGNORECASE
)


def secrets_in(url: str) -> list[str]:
    """What of ``url`` is a secret: its user-info (user:password@) and the query parameters that look like one."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(str(url))
    except ValueError:
        return []
    found = []
    if parts.username is not None or parts.password is not None:
        found.append("a user name and password (user:password@)")
    names = [
        name
        for name, _ in parse_qsl(parts.query, keep_blank_values=True)
        if _SECRET_PARAMETER.search(name)
    ]
    if names:
        found.append(f"a secret in its query ({', '.join(sorted(set(names)))})")
    return found


def refuse_secrets(url: str, where: str) -> None:
    """Refuse a location that carries credentials, which would reach command lines, logs and manifests."""
    found = secrets_in(url)
    if found:
        raise LcflowError(
            f"{where} = {redact(url)!r} carries {' and '.join(found)}: credentials must not be written "
            "where commands, logs and manifests show them; give them as "
            + ", ".join(CREDENTIAL_SOURCES[:-1])
            + f" or {CREDENTIAL_SOURCES[-1]}"
        )


def clean_href(href: str) -> str:
    """``href`` without user-info and the query parameters that carry a secret (tokens, signatures): what a
    manifest may keep of it. Other parameters (``?v=1``, a version the server needs) stay."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    if "://" not in str(href):
        return href
    parts = urlsplit(str(href))
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    kept = [
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if not _SECRET_PARAMETER.search(k)
    ]
    return urlunsplit((parts.scheme, host, parts.path, urlencode(kept), ""))


def _hostname(url: str) -> str | None:
    from urllib.parse import urlsplit

    return urlsplit(str(url)).hostname


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(str(url))
    return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)


def request_headers(url: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The credentials of a request to ``url``, as GDAL would send them: GDAL_HTTP_HEADERS (header lines
    separated by CRLF), else GDAL_HTTP_USERPWD (basic), else the host's entry in ~/.netrc (or $NETRC)."""
    import base64
    import netrc
    import os

    env = os.environ if env is None else env
    headers = _header_lines(env)
    if "Authorization" not in headers and env.get("GDAL_HTTP_USERPWD"):
        token = base64.b64encode(env["GDAL_HTTP_USERPWD"].encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    if "Authorization" not in headers and env.get("GDAL_HTTP_NETRC", "YES").upper() not in (
        "NO",
        "FALSE",
        "OFF",
        "0",
    ):
        path = env.get("NETRC") or os.path.expanduser("~/.netrc")
        try:
            entry = netrc.netrc(path).authenticators(_host(url).split(":")[0])
        except (OSError, netrc.NetrcParseError):
            entry = None
        if entry and entry[2] is not None:
            token = base64.b64encode(f"{entry[0]}:{entry[2]}".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
    return headers


#: hosts a request to which never leaves this machine (plain http to them carries no secret anywhere)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


#: GDAL_HTTP_HEADERS lines that are no credential (what a client says of itself, and what it accepts): every
#: other line is taken for a secret (an API key, a subscription key, a token), whatever its name
NOT_SECRET_HEADERS = frozenset({"user-agent", "accept", "accept-language"})


def _header_lines(env: Mapping[str, str]) -> dict[str, str]:
    """GDAL_HTTP_HEADERS as name -> value (header lines separated by CRLF or LF)."""
    headers: dict[str, str] = {}
    for line in re.split(r"\r?\n", env.get("GDAL_HTTP_HEADERS", "")):
        name, sep, value = line.partition(":")
        if sep and name.strip():
            headers[name.strip()] = value.strip()
    return headers


def secret_header_names(env: Mapping[str, str] | None = None) -> list[str]:
    """The request headers no redirect to another host may carry: Authorization, cookies, and every
    GDAL_HTTP_HEADERS line but NOT_SECRET_HEADERS."""
    import os

    env = os.environ if env is None else env
    names = {"Authorization", "Cookie", "Proxy-Authorization"}
    names |= {n for n in _header_lines(env) if n.lower() not in NOT_SECRET_HEADERS}
    return sorted(names)


def credentials_in_env(env: Mapping[str, str] | None = None) -> str | None:
    """The variable holding credentials that GDAL sends with every request it makes, to every host
    (GDAL_HTTP_USERPWD, or any GDAL_HTTP_HEADERS line but NOT_SECRET_HEADERS: an ``X-Api-Key`` is as
    secret as an Authorization), None where neither does. ~/.netrc is not one: GDAL sends a netrc entry
    to its own host only."""
    import os

    env = os.environ if env is None else env
    if env.get("GDAL_HTTP_USERPWD"):
        return "GDAL_HTTP_USERPWD"
    if any(n.lower() not in NOT_SECRET_HEADERS for n in _header_lines(env)):
        return "GDAL_HTTP_HEADERS"
    return None


def check_credentials_reach(
    hrefs: Iterable[tuple[str, str]], source: str | None, env: dict[str, str] | None = None
) -> None:
    """Refuse reads that would carry credentials where they were not given for, before any read.

    GDAL sends GDAL_HTTP_USERPWD and GDAL_HTTP_HEADERS with every request, to every host: so with one of
    them set, every remote asset (``hrefs``: what it is, its href) must be on the catalogue's host
    (``source``, where the manifest came from; for a local catalogue, the first asset's host) and reached
    over https, or stay on this machine. The way out is ~/.netrc, whose entries GDAL sends to their host
    alone."""
    from urllib.parse import urlsplit

    variable = credentials_in_env(env)
    if variable is None:
        return
    allowed = _host(source) if source and is_url(source) else None
    for what, href in hrefs:
        if not is_url(href):
            continue
        parts = urlsplit(str(href))
        allowed = allowed or _host(href)
        why = ""
        if parts.scheme == "http" and parts.hostname not in LOOPBACK:
            why = "over plain http, where anyone on the way reads them"
        elif _host(href) != allowed:
            why = f"to {_host(href)}, not the host they are for ({allowed})"
        if why:
            raise LcflowError(
                f"{variable} is set, and GDAL sends it with every request: reading {what} "
                f"({redact(href)}) would send the credentials {why}; give them for their host in "
                f"~/.netrc (GDAL sends an entry to its own host only) and unset {variable}"
            )


def _read_url(href: str, headers: dict[str, str]) -> str:
    """The text at ``href``, as pystac reads it (urllib3), but with every credential header dropped on a
    redirect to another host (urllib3 drops only Authorization and cookies)."""
    from email.message import Message
    from urllib.error import HTTPError

    import urllib3

    retry = urllib3.Retry(total=3, redirect=5, remove_headers_on_redirect=secret_header_names())
    with urllib3.PoolManager(retries=retry).request(
        "GET", href, headers={"User-Agent": "lcflow", **headers}, preload_content=False
    ) as answer:
        if answer.status >= 400:  # as pystac says it, which stac_sources turns into one line
            raise Exception(f"Could not read uri {redact(href)}") from HTTPError(
                redact(href), answer.status, answer.reason or "", Message(), None
            )
        return answer.read().decode("utf-8")


def catalogue_io(root: str):
    """pystac's reader for the catalogue at ``root``: credentials (:func:`request_headers`) go to its own
    host only, and a remote catalogue may not link to local files (it could make lcflow read any file).
    Its ``files`` lists the local files it read."""
    import logging

    from pystac.stac_io import DefaultStacIO

    # its debug line prints the request's headers
    logging.getLogger("pystac.stac_io").setLevel(logging.INFO)
    remote, host = is_url(root), _host(root) if is_url(root) else None

    class CatalogueIO(DefaultStacIO):
        files: list[str] = []  # the local files read: inputs no output may overwrite

        def read_text_from_href(self, href: str) -> str:
            if not is_url(href):
                self.files.append(href)
            if remote and not is_url(href):
                raise LcflowError(
                    f"STAC catalog {redact(root)} links to {redact(href)}, which is not an http(s) URL: "
                    "a remote catalogue may link to remote files only"
                )
            self.headers = request_headers(href) if remote and _host(href) == host else {}
            if self.headers and href.startswith("http://") and _hostname(href) not in LOOPBACK:
                raise LcflowError(
                    f"STAC catalog {redact(root)}: reading {redact(href)} would send credentials over "
                    "plain http, where anyone on the way reads them: use its https URL"
                )
            if not is_url(href):
                return super().read_text_from_href(href)
            return _read_url(href, self.headers)

    reader = CatalogueIO()
    reader.files = []
    return reader
