"""One scene file copied onto the shared file system: resumed where it stopped, verified, retried.

Transfers go through urllib3 (the HTTP client under requests and pystac-client): its ``Retry`` backs off
and honours ``Retry-After`` on 429 and 503, its read timeout ends a stalled connection, and a partial file
continues with an HTTP Range request. A file is written under a staging name of lcflow's own and renamed
into place only once its size, its checksum (STAC's ``file:size`` / ``file:checksum`` where the item gives
them) and its raster structure are checked: a finished file is never fetched again, and nothing truncated
or corrupt reaches a cube. Why urllib3 and not fsspec or GDAL's copy: benchmarks/stage_in.py.
"""

import functools
import hashlib
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lcflow.common.progress import duration
from lcflow.errors import LcflowError
from lcflow.retrieve import remote

log = logging.getLogger("lcflow")

#: bytes read from a response (and written) at a time
CHUNK = 1 << 20
#: the longest wait, seconds: a back-off between attempts, or a server's ``Retry-After``; a server that
#: asks for longer is refused (nothing waits for hours on a login node)
LONGEST_WAIT_S = 600
#: a staged file's name while it is written (a prefix and suffix no product of lcflow or a user has)
PART_SUFFIX = ".lcflow-part"
#: the first bytes of the rasters a scene asset may be: TIFF (classic and BigTIFF, both byte orders), JPEG 2000
RASTER_MAGIC = (
    b"II*\x00",
    b"MM\x00*",
    b"II+\x00",
    b"MM\x00+",
    b"\x00\x00\x00\x0cjP  \r\n\x87\n",
    b"\xffO\xffQ",
)
#: multihash function codes (multiformats' table) -> hashlib constructor
MULTIHASH: dict[int, Callable[[], Any]] = {
    0x11: hashlib.sha1,
    0x12: hashlib.sha256,
    0x13: hashlib.sha512,
    0x14: hashlib.sha3_512,
    0x15: hashlib.sha3_384,
    0x16: hashlib.sha3_256,
    0x17: hashlib.sha3_224,
    0xD5: hashlib.md5,
    0xB220: lambda: hashlib.blake2b(digest_size=32),
    0xB240: hashlib.blake2b,
}


@dataclass(frozen=True)
class Asset:
    """A file to stage: what it is (named in every message), where it is read, where it goes."""

    what: str
    href: str
    dest: Path
    size: int | None = None  # STAC file:size, bytes
    checksum: str | None = None  # STAC file:checksum, a multihash in hex

    @property
    def part(self) -> Path:
        return self.dest.with_name(f".{self.dest.name}{PART_SUFFIX}")


class Failed(Exception):
    """An attempt that failed in a way another attempt may mend (resumed from what was received)."""

    def __init__(self, reason: str, restart: bool = False):
        super().__init__(reason)
        self.restart = restart  # what was received is wrong: start over


def parse_multihash(text: str) -> tuple[Callable[[], "hashlib._Hash"], bytes] | None:
    """(hash constructor, digest) of a hex multihash, None for a function this module does not know."""
    data = bytes.fromhex(text)

    def varint(at: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            byte = data[at]
            value |= (byte & 0x7F) << shift
            at, shift = at + 1, shift + 7
            if not byte & 0x80:
                return value, at

    code, at = varint(0)
    length, at = varint(at)
    digest = data[at : at + length]
    if len(digest) != length:
        raise ValueError(
            f"multihash {text[:16]}...: its digest has {len(digest)} bytes, {length} said"
        )
    return (MULTIHASH[code], digest) if code in MULTIHASH else None


class Rate:
    """Files and bytes staged so far, logged every ``every`` seconds and at the end: rate and time left."""

    def __init__(self, what: str, files: int, total_bytes: int, every: float = 30.0):
        self.what, self.files, self.total, self.every = what, files, total_bytes, every
        self.started = self.last = time.monotonic()
        self.done_files = self.done_bytes = self.received = 0
        self._lock = threading.Lock()

    def add(self, received: int, finished: int = 0, counted: int = 0) -> None:
        """``received`` bytes more over the network; ``finished`` files done, ``counted`` bytes of them
        already on disk before this run."""
        with self._lock:
            self.received += received
            self.done_bytes += received + counted
            self.done_files += finished
            now = time.monotonic()
            if now - self.last >= self.every or self.done_files >= self.files:
                self.last = now
                self.log(now)

    def log(self, now: float) -> None:
        elapsed = max(now - self.started, 1e-9)
        rate = self.received / elapsed
        left = (
            0.0
            if self.done_files >= self.files
            else (max(0, self.total - self.done_bytes) / rate if rate > 0 else float("inf"))
        )
        log.info(
            "%s: %d/%d files, %.2f/%.2f GB, %.1f MB/s, %s elapsed, %s left",
            self.what,
            self.done_files,
            self.files,
            self.done_bytes / 1e9,
            self.total / 1e9,
            rate / 1e6,
            duration(elapsed),
            duration(left),
        )


class _WithoutQueries(logging.Filter):
    """urllib3 logs each retry with the request's path and query, where signatures live (a Planetary
    Computer SAS token): its lines keep the path alone."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        record.msg, record.args = re.sub(r"\?[^\s'\"]*", "", text), ()
        return True


for _name in ("urllib3.connectionpool", "urllib3.util.retry"):
    logging.getLogger(_name).addFilter(_WithoutQueries())


class _WaitTooLong(Exception):
    """A server's ``Retry-After`` beyond LONGEST_WAIT_S."""

    def __init__(self, seconds: float):
        super().__init__(seconds)
        self.seconds = seconds


@functools.cache
def _retry_class():
    """urllib3's ``Retry`` that refuses a ``Retry-After`` longer than LONGEST_WAIT_S instead of sleeping
    through it (urllib3 caps its own back-off at ``backoff_max``, but sleeps whatever a server asks)."""
    import urllib3

    class Retry(urllib3.Retry):
        def parse_retry_after(self, retry_after: str) -> float:
            seconds = super().parse_retry_after(retry_after)
            if seconds > LONGEST_WAIT_S:
                raise _WaitTooLong(seconds)
            return seconds

    return Retry


class Fetcher:
    """Fetches assets over up to ``connections`` connections a host, signing each URL as it is requested
    (signatures expire while a queue waits) and sending credentials (remote.request_headers) to their own
    host only."""

    def __init__(
        self, network: remote.Network, connections: int, sign: Callable[[str], str] | None = None
    ):
        import urllib3

        self.network, self.sign = network, sign
        retry = _retry_class()(
            total=network.retries,
            backoff_factor=network.retry_delay_s,
            backoff_max=LONGEST_WAIT_S,
            status_forcelist=(429, 500, 502, 503, 504),
            allowed_methods=("GET", "HEAD"),
            respect_retry_after_header=True,
            raise_on_status=False,
            redirect=5,
        )
        self.pool = urllib3.PoolManager(
            num_pools=8,
            maxsize=connections,
            block=True,
            retries=retry,
            timeout=urllib3.Timeout(connect=network.connect_timeout_s, read=network.timeout_s),
        )

    def size(self, asset: Asset) -> int:
        """The asset's size: STAC's ``file:size``, else the server's (a HEAD request), else the local file's."""
        if asset.size is not None:
            return asset.size
        if not remote.is_url(asset.href):
            return _local(asset).stat().st_size
        try:
            answer = self._request("HEAD", asset, {})
        except Failed as exc:  # urllib3 retried already: no host, no route, no answer
            raise LcflowError(
                f"{asset.what} ({remote.redact(asset.href)}): its size cannot be asked for: {exc} "
                "(the stage-in runs where the network is: docs/slurm.md)"
            ) from None
        answer.release_conn()
        if answer.status != 200 or answer.headers.get("Content-Length") is None:
            raise LcflowError(
                f"{asset.what} ({remote.redact(asset.href)}): the server gives no size "
                f"(HEAD answered {answer.status})"
            )
        return int(answer.headers["Content-Length"])

    def fetch(self, asset: Asset, rate: Rate | None = None) -> int:
        """Stage ``asset`` at ``asset.dest`` unless it is there already; the bytes received."""
        if asset.dest.exists():
            if rate:
                rate.add(0, 1, asset.dest.stat().st_size)
            return 0
        asset.dest.parent.mkdir(parents=True, exist_ok=True)
        received, reason = 0, ""
        for attempt in range(self.network.retries + 1):
            if attempt:
                delay = min(LONGEST_WAIT_S, self.network.retry_delay_s * 2 ** (attempt - 1))
                log.warning(
                    "%s: %s; attempt %d of %d in %s",
                    asset.what,
                    reason,
                    attempt + 1,
                    self.network.retries + 1,
                    duration(delay),
                )
                time.sleep(delay)
            try:
                received += self._attempt(asset, rate)
                verify(asset.part, asset)
            except Failed as failure:
                reason = str(failure)
                if failure.restart:
                    asset.part.unlink(missing_ok=True)
                continue
            os.replace(asset.part, asset.dest)
            if rate:
                rate.add(0, 1)
            return received
        raise LcflowError(
            f"{asset.what} ({remote.redact(asset.href)}): {reason}, {self.network.retries + 1} "
            "attempts; nothing of it reaches a cube, and a rerun resumes it"
        )

    def _attempt(self, asset: Asset, rate: Rate | None) -> int:
        """One request, appended to the partial file; the bytes received."""
        if not remote.is_url(asset.href):
            with asset.part.open("wb") as out, _local(asset).open("rb") as src:
                shutil.copyfileobj(src, out, CHUNK)
            got = asset.part.stat().st_size
            if rate:
                rate.add(got)
            return got
        have = asset.part.stat().st_size if asset.part.exists() else 0
        answer = self._request(
            "GET", asset, {"Range": f"bytes={have}-"} if have else {}, stream=True
        )
        try:
            total = self._expected(answer, asset, have)
            if total is None:  # the partial file is whole already (416)
                return 0
            if answer.status == 200:
                have = 0
            return self._receive(answer, asset, have, total, rate)
        finally:
            answer.release_conn()

    def _request(self, method: str, asset: Asset, headers: dict[str, str], stream: bool = False):
        import urllib3

        url = self.sign(asset.href) if self.sign else asset.href
        try:
            return self.pool.request(
                method,
                url,
                headers={**remote.request_headers(url), **headers},
                preload_content=not stream,
                decode_content=False,
            )
        except _WaitTooLong as exc:
            raise LcflowError(
                f"{asset.what} ({remote.redact(asset.href)}): the server asks to be asked again in "
                f"{duration(exc.seconds)} (Retry-After), longer than the {duration(LONGEST_WAIT_S)} "
                "lcflow waits; run again later, and the files staged so far are kept"
            ) from None
        except urllib3.exceptions.HTTPError as exc:
            raise Failed(f"no answer ({type(exc).__name__}: {remote.redact(str(exc))})") from None

    def _expected(self, answer, asset: Asset, have: int) -> int | None:
        """The file's whole size from a GET's answer; None where a Range past the end says the partial
        file is whole. Answers that cannot be the file end the attempt."""
        status, headers = answer.status, answer.headers
        if status == 416 and have:
            whole = headers.get("Content-Range", "").rpartition("/")[2]
            if whole.isdigit() and int(whole) == have:
                return None
            raise Failed(
                f"the partial file's {have} bytes are more than the server's {whole or '?'}",
                restart=True,
            )
        if status in (401, 403, 404, 410):
            raise LcflowError(
                f"{asset.what} ({remote.redact(asset.href)}): the server answered {status} "
                f"{answer.reason}"
                + (": credentials go in ~/.netrc for that host" if status == 401 else "")
            )
        if status not in (200, 206):
            raise Failed(f"the server answered {status} {answer.reason}")
        if headers.get("Content-Type", "").split(";")[0].strip().lower() in (
            "text/html",
            "application/xhtml+xml",
        ):
            raise Failed(
                f"the server sent an HTML page (status {status}), not the raster", restart=True
            )
        if status == 206:
            start, _, whole = headers.get("Content-Range", "").removeprefix("bytes ").partition("/")
            if not start.startswith(f"{have}-") or not whole.isdigit():
                raise Failed(
                    f"the server answered bytes {start or '?'} of a request for bytes {have}-",
                    restart=True,
                )
            return int(whole)
        length = headers.get("Content-Length")
        return int(length) if length and length.isdigit() else asset.size or -1

    def _receive(self, answer, asset: Asset, have: int, total: int, rate: Rate | None) -> int:
        import urllib3

        got = 0
        with asset.part.open("r+b" if have else "wb") as out:
            out.seek(have)
            out.truncate()
            try:
                while chunk := answer.read1(CHUNK):  # what has come: a stall loses none of it
                    out.write(chunk)
                    got += len(chunk)
                    if rate:
                        rate.add(len(chunk))
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if isinstance(exc, OSError) and not isinstance(exc, ConnectionError | TimeoutError):
                    raise  # the disk, not the network
                why = "stalled" if "timed out" in str(exc).lower() else "broke off"
                raise Failed(f"the connection {why} after {have + got} of {total} bytes") from None
        if total >= 0 and have + got < total:
            raise Failed(f"the server sent {have + got} of {total} bytes")
        if total >= 0 and have + got > total:
            raise Failed(f"the server sent {have + got} bytes, more than its {total}", restart=True)
        return got


def _local(asset: Asset) -> Path:
    """The local file an asset names; refused, naming the asset, where there is none."""
    path = Path(asset.href[len("file://") :] if asset.href.startswith("file://") else asset.href)
    if not path.is_file():
        raise LcflowError(f"{asset.what}: {path} is not a file")
    return path


def verify(path: Path, asset: Asset) -> None:
    """Refuse (as a failed attempt that starts over) a file that is not the asset: a size other than STAC's,
    a checksum other than STAC's, or not a whole raster (an error page, a truncated file)."""
    from lcflow.common import raster

    size = path.stat().st_size
    if asset.size is not None and size != asset.size:
        raise Failed(f"{size} bytes received, the item says {asset.size} (file:size)", restart=True)
    if asset.checksum:
        try:
            known = parse_multihash(asset.checksum)
        except ValueError as exc:
            raise LcflowError(
                f"{asset.what}: its file:checksum {asset.checksum!r} is no multihash ({exc})"
            ) from None
        if known is None:
            log.warning(
                "%s: file:checksum uses a hash function lcflow does not know; only its size is checked",
                asset.what,
            )
        else:
            digest = known[0]()
            with path.open("rb") as src:
                while block := src.read(CHUNK):
                    digest.update(block)
            if digest.digest() != known[1]:
                raise Failed("its checksum is not the item's file:checksum", restart=True)
    with path.open("rb") as src:
        head = src.read(12)
    if not any(head.startswith(m) for m in RASTER_MAGIC):
        shown = head.decode("ascii", "replace").strip() or "nothing"
        raise Failed(f"what was received is not a raster (it starts {shown!r})", restart=True)
    why = raster.why_incomplete(path) if head[:2] in (b"II", b"MM") else None
    if why:
        raise Failed(f"what was received is not a whole raster ({why})", restart=True)
