"""One scene file copied onto the shared file system: resumed where it stopped, verified, retried.

Transfers go through urllib3 (the HTTP client under requests and pystac-client): its ``Retry`` backs off
and honours ``Retry-After`` on 429 and 503, its read timeout ends a stalled connection, and a partial file
continues with an HTTP Range request sent with ``If-Range`` (the first answer's ETag or Last-Modified) and
overlapping what was received: a file changed on the server, or a server that sends other bytes, starts the
file over. A file is written under a staging name of lcflow's own and renamed into place only once
:mod:`lcflow.retrieve.staged_file` has checked it: a finished file is never fetched again, and nothing
truncated or corrupt reaches a cube. Why urllib3 and not fsspec or GDAL's copy: benchmarks/stage_in.py.
"""

import contextlib
import errno
import functools
import json
import logging
import os
import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lcflow.common.progress import amount, duration
from lcflow.errors import LcflowError
from lcflow.retrieve import remote
from lcflow.retrieve.staged_file import NotTheFile, verify
from lcflow.retrieve.transfer_rate import Rate

if TYPE_CHECKING:
    from lcflow.retrieve.stage_ledger import Ledger

log = logging.getLogger("lcflow")

#: bytes read from a response (and written) at a time
CHUNK = 1 << 20
#: the longest wait, seconds: a back-off between attempts, or a server's ``Retry-After``; a server that
#: asks for longer is refused (nothing waits for hours on a login node)
LONGEST_WAIT_S = 600
#: a staged file's name while it is written (a prefix and suffix no product of lcflow or a user has)
PART_SUFFIX = ".lcflow-part"
#: beside a partial file, the first answer's validators (what a resume sends as If-Range)
RESUME_SUFFIX = ".lcflow-resume"
#: bytes of what was received that a resume asks for again, and compares (a server that sends other bytes
#: under the right Content-Range, or a file changed on the server, differs there)
OVERLAP = 1 << 16


@dataclass(frozen=True)
class Asset:
    """A file to stage: what it is (named in every message), where it is read, where it goes."""

    what: str
    href: str
    dest: Path
    size: int | None = None  # STAC file:size, bytes
    checksum: str | None = None  # STAC file:checksum, a multihash in hex
    shape: tuple[int, int] | None = None  # STAC proj:shape of the asset, rows and columns

    @property
    def part(self) -> Path:
        return self.dest.with_name(f".{self.dest.name}{PART_SUFFIX}")

    @property
    def validator(self) -> Path:
        """Where the first answer's ETag and Last-Modified are kept while the part file grows."""
        return self.dest.with_name(f".{self.dest.name}{RESUME_SUFFIX}")


class Failed(Exception):
    """An attempt that failed in a way another attempt may mend (resumed from what was received)."""

    def __init__(self, reason: str, restart: bool = False):
        super().__init__(reason)
        self.restart = restart  # what was received is wrong: start over


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


def _why_no_answer(exc: Exception) -> str:
    """One line for a request urllib3 gave up on: the redirects, the refused or unreachable host, the
    timeout, without urllib3's object reprs."""
    import urllib3

    reason = getattr(exc, "reason", None) or exc
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and isinstance(
        reason, urllib3.exceptions.ResponseError
    ):
        return (
            f"the server answered with errors or redirects too often ({remote.redact(str(reason))})"
        )
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        why = str(reason).rpartition("] ")[2] or "no connection"
        return f"no connection to the server ({why})"
    if isinstance(reason, urllib3.exceptions.NameResolutionError):
        return "the server's name does not resolve"
    if isinstance(reason, urllib3.exceptions.TimeoutError):
        return "the server did not answer in time"
    return f"no answer ({type(reason).__name__}: {remote.redact(str(reason))})"


class Fetcher:
    """Fetches assets over up to ``connections`` connections a host, signing each URL as it is requested
    (signatures expire while a queue waits) and sending credentials (remote.request_headers) to their own
    host only: on a redirect to another host every credential header is dropped (urllib3 drops only
    Authorization and cookies). ``stop`` (set on Ctrl-C) ends every transfer within a chunk."""

    def __init__(
        self, network: remote.Network, connections: int, sign: Callable[[str], str] | None = None
    ):
        import urllib3

        self.network, self.sign = network, sign
        self.stop = threading.Event()
        retry = _retry_class()(  # a redirect is not a retry: the retries count failures alone
            total=None,
            connect=network.retries,
            read=network.retries,
            status=network.retries,
            other=network.retries,
            backoff_factor=network.retry_delay_s,
            backoff_max=LONGEST_WAIT_S,
            status_forcelist=(429, 500, 502, 503, 504),
            allowed_methods=("GET", "HEAD"),
            respect_retry_after_header=True,
            raise_on_status=False,
            redirect=5,
            remove_headers_on_redirect=remote.secret_header_names(),
        )
        self.pool = urllib3.PoolManager(
            num_pools=8,
            maxsize=connections,
            block=True,
            retries=retry,
            timeout=urllib3.Timeout(connect=network.connect_timeout_s, read=network.timeout_s),
        )

    def size(self, asset: Asset) -> int:
        """The asset's size: STAC's ``file:size``, else the server's (a HEAD request, else the
        ``Content-Range`` of a one-byte GET for servers that refuse HEAD or give no length), else the
        local file's."""
        if asset.size is not None:
            return asset.size
        if not remote.is_url(asset.href):
            return _local(asset).stat().st_size
        try:
            answer = self._request("HEAD", asset, {})
            answer.release_conn()
            length = answer.headers.get("Content-Length", "")
            if answer.status == 200 and length.isdigit():
                return int(length)
            answer = self._request("GET", asset, {"Range": "bytes=0-0"}, stream=True)
            answer.release_conn()
        except Failed as exc:  # urllib3 retried already: no host, no route, no answer
            raise LcflowError(
                f"{asset.what} ({remote.redact(asset.href)}): its size cannot be asked for: {exc} "
                "(the stage-in runs where the network is: docs/slurm.md)"
            ) from None
        whole = answer.headers.get("Content-Range", "").rpartition("/")[2]
        if answer.status == 206 and whole.isdigit():
            return int(whole)
        raise LcflowError(
            f"{asset.what} ({remote.redact(asset.href)}): the server gives no size (HEAD answered "
            f"{answer.status} without a length, a one-byte GET {answer.status}): set file:size in its "
            "item, or stage.mode: remote"
        )

    def fetch(self, asset: Asset, rate: Rate | None = None, ledger: "Ledger | None" = None) -> int:
        """Stage ``asset`` at ``asset.dest`` unless it is there already; the bytes received. ``ledger``
        records the file as the stage-in's own before it is renamed into place."""
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
                if self.stop.wait(delay):
                    break
            try:
                received += self._attempt(asset, rate)
                verify(asset.part, asset.what, asset.size, asset.checksum, asset.shape)
            except NotTheFile as wrong:
                reason = str(wrong)
                self._start_over(asset)
                continue
            except Failed as failure:
                reason = str(failure)
                if failure.restart:
                    self._start_over(asset)
                continue
            if ledger is not None:
                ledger.record(asset.part, asset.dest)
            os.replace(asset.part, asset.dest)
            asset.validator.unlink(missing_ok=True)
            if rate:
                rate.add(0, 1)
            return received
        if self.stop.is_set():
            raise LcflowError(f"{asset.what}: stopped; a rerun resumes it")
        raise LcflowError(
            f"{asset.what} ({remote.redact(asset.href)}): {reason}, {self.network.retries + 1} "
            "attempts; nothing of it reaches a cube, and a rerun resumes it"
        )

    @staticmethod
    def _start_over(asset: Asset) -> None:
        asset.part.unlink(missing_ok=True)
        asset.validator.unlink(missing_ok=True)

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
        condition = _read_validator(asset) if have else None
        if have and condition is None:  # nothing says the server's file is still the one begun
            log.info(
                "%s: the server gave no ETag or Last-Modified for the %s received: starting over",
                asset.what,
                amount(have),
            )
            self._start_over(asset)
            have = 0
        overlap = min(have, OVERLAP)
        headers = {"Accept-Encoding": "identity"}
        if have:
            headers |= {"Range": f"bytes={have - overlap}-", "If-Range": condition or ""}
        answer = self._request("GET", asset, headers, stream=True)
        try:
            total = self._expected(answer, asset, have - overlap)
            if total is None:  # the partial file is whole already (416)
                return 0
            if answer.status == 200:  # the whole file: changed since, or ranges not served
                have = overlap = 0
                _write_validator(asset, answer.headers)
            if overlap:
                self._check_overlap(answer, asset, have, overlap)
            return self._receive(answer, asset, have, total, rate)
        finally:
            answer.release_conn()

    def _check_overlap(self, answer, asset: Asset, have: int, overlap: int) -> None:
        """The first ``overlap`` bytes of a resumed answer must be the last ones received."""
        sent = answer.read(overlap)
        with asset.part.open("rb") as part:
            part.seek(have - overlap)
            kept = part.read(overlap)
        if sent != kept:
            raise Failed(
                f"the server's bytes {have - overlap}-{have - 1} are not those it sent before (the file "
                "changed, or the server sends other bytes): starting the file over",
                restart=True,
            )

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
            raise Failed(_why_no_answer(exc)) from None

    def _expected(self, answer, asset: Asset, start: int) -> int | None:
        """The file's whole size from a GET's answer to a request from byte ``start``; None where a Range
        past the end says the partial file is whole. Answers that cannot be the file end the attempt."""
        status, headers = answer.status, answer.headers
        if status == 416 and start:
            whole = headers.get("Content-Range", "").rpartition("/")[2]
            if whole.isdigit() and int(whole) == start:
                return None
            raise Failed(
                f"the partial file's {start} bytes are more than the server's {whole or '?'}",
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
        encoding = headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise LcflowError(
                f"{asset.what} ({remote.redact(asset.href)}): the server sent it {encoding}-encoded "
                "(Content-Encoding) though asked for the file as it is (Accept-Encoding: identity); a "
                "transfer that resumes needs the file's own bytes: fetch it another way, or set "
                "stage.mode: remote"
            )
        if status == 206:
            got, _, whole = headers.get("Content-Range", "").removeprefix("bytes ").partition("/")
            if not got.startswith(f"{start}-") or not whole.isdigit():
                raise Failed(
                    f"the server answered bytes {got or '?'} of a request for bytes {start}-",
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
                    if self.stop.is_set():
                        raise Failed(f"stopped after {have + got} of {total} bytes")
                out.flush()
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    out.close()
                    self._start_over(asset)
                    raise LcflowError(
                        f"{asset.what}: the file system of {asset.dest.parent} is full after "
                        f"{amount(have + got)} of it ({os.strerror(exc.errno)}); its partial file is "
                        "removed: free space, or set stage.dir to a larger file system"
                    ) from None
                if isinstance(exc, OSError) and not isinstance(exc, ConnectionError | TimeoutError):
                    raise  # the disk, not the network
                why = "stalled" if "timed out" in str(exc).lower() else "broke off"
                raise Failed(f"the connection {why} after {have + got} of {total} bytes") from None
        if total >= 0 and have + got < total:
            raise Failed(f"the server sent {have + got} of {total} bytes")
        if total >= 0 and have + got > total:
            raise Failed(f"the server sent {have + got} bytes, more than its {total}", restart=True)
        return got


def _write_validator(asset: Asset, headers) -> None:
    """Keep the answer's ETag (a strong one) and Last-Modified, which a resume sends as ``If-Range``."""
    etag = headers.get("ETag", "")
    kept = {
        "etag": etag if etag.startswith('"') else None,  # If-Range takes a strong ETag only
        "last_modified": headers.get("Last-Modified"),
    }
    asset.validator.write_text(json.dumps(kept))


def _read_validator(asset: Asset) -> str | None:
    """The ``If-Range`` of a resume: the first answer's strong ETag, else its Last-Modified; None where the
    server gave neither (or the record is lost)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        kept = json.loads(asset.validator.read_text())
        return kept.get("etag") or kept.get("last_modified")
    return None


def _local(asset: Asset) -> Path:
    """The local file an asset names; refused, naming the asset, where there is none."""
    path = Path(asset.href[len("file://") :] if asset.href.startswith("file://") else asset.href)
    if not path.is_file():
        raise LcflowError(f"{asset.what}: {path} is not a file")
    return path
