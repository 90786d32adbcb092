"""Windows of a scene's assets read as stored, on their own pixel grid, from files kept open.

A cube reads a window of every asset of every scene, window after window. Opening a file again for
each window costs a request for its header over HTTP and throws away GDAL's cache of decompressed
tiles, where neighbouring windows share a source tile; so each file is opened once per job. Signed
URLs (Planetary Computer) expire: such a file is signed and opened again after ``max_age_s``.
"""

import logging
import math
import re
import resource
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from affine import Affine

from lcflow.errors import LcflowError
from lcflow.retrieve import remote

#: file descriptors kept free for everything else the process opens
_SPARE_FILES = 256
#: GDAL's messages that say why a remote read failed (its error then is often only "not recognized as
#: being in a supported file format"): an HTTP status, curl's words; not any message that holds a URL
_NETWORK_MESSAGE = re.compile(
    r"HTTP (response|error) code|curl error|timed out|could not resolve|connection|SSL",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class FileFacts:
    """A raster file's header: its pixel grid, CRS, bands and their types, no-data values and (scale,
    offset) tags."""

    transform: Affine
    shape: tuple[int, int]
    epsg: int | None
    count: int
    dtypes: tuple[str, ...]
    nodata: tuple[float | None, ...]
    scales: tuple[tuple[float, float], ...]

    @classmethod
    def of(cls, src) -> "FileFacts":
        """The facts of an open rasterio dataset."""
        return cls(
            transform=src.transform,
            shape=(src.height, src.width),
            epsg=src.crs.to_epsg() if src.crs else None,
            count=src.count,
            dtypes=tuple(src.dtypes),
            nodata=tuple(src.nodatavals),
            scales=tuple(zip(src.scales, src.offsets)),
        )


class AssetReadError(Exception):
    """A file that could not be opened or read: GDAL's own words, and what the network said."""


class _GdalMessages(logging.Handler):
    """GDAL's warnings and errors (as rasterio logs them) in the thread that is reading, while it reads."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.local = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        messages = getattr(self.local, "messages", None)
        if messages is not None:
            messages.append(record.getMessage())


class AssetReader:
    """Reads windows of raster files opened once and kept open (at most ``max_open`` at a time, the
    least recently read closed first). One reader serves many threads, each file one thread at a time."""

    def __init__(
        self,
        sign: Callable[[str], str] | None = None,
        max_age_s: float = 600.0,
        max_open: int | None = None,
    ):
        self.sign = sign
        self.max_age_s = max_age_s
        self.max_open = max_open or open_files_allowed()
        self._open: OrderedDict[str, tuple[Any, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._file_locks: dict[str, threading.Lock] = {}
        self._messages = _GdalMessages()
        logging.getLogger("rasterio._env").addHandler(self._messages)

    def read(
        self,
        href: str,
        region: Affine,
        shape: tuple[int, int],
        out: np.ndarray | None = None,
        band: int = 1,
        fill: float = 0,
    ) -> np.ndarray:
        """A window of one band of a file, in the file's data type; a failure raises
        :class:`AssetReadError` with GDAL's reason and the network's answer.

        Args:
            href: the file (a path or URL).
            region: the transform of the window's first pixel, on the file's own pixel grid.
            shape: the window's rows and columns.
            out: the array to read into (of the file's type), or None for a new one.
            band: the band of the file (1-based).
            fill: the value of the pixels beyond the file (the band's no-data).
        """
        if out is not None and out.shape != tuple(shape):
            raise ValueError(f"a window of {tuple(shape)} px read into an array of {out.shape}")
        return self._guarded(href, self._read, href, region, shape, out, band, fill)

    def facts(self, href: str) -> "FileFacts":
        """What ``href``'s header says of its pixels (:class:`FileFacts`). Failures as :meth:`read`."""
        return self._guarded(href, lambda href: FileFacts.of(self._dataset(href)), href)

    def block_bytes(self, href: str) -> int:
        """The bytes of one decoded block (internal tile) of ``href``'s band 1: what GDAL's block cache
        holds of the file while windows inside that block are read. Failures as :meth:`read`."""

        def size(href: str) -> int:
            src = self._dataset(href)
            rows, cols = src.block_shapes[0]
            return rows * cols * np.dtype(src.dtypes[0]).itemsize

        return self._guarded(href, size, href)

    def _guarded(self, href: str, action: Callable, *args):
        self._messages.local.messages = []
        with self._lock:
            # a GDAL dataset serves one thread at a time: the bands of a multi-band file are read in turn
            lock = self._file_locks.setdefault(href, threading.Lock())
        try:
            with lock:
                return action(*args)
        except LcflowError:
            raise
        except Exception as exc:
            reason, said = _reason(exc, self._messages.local.messages)
            # GDAL read nothing and did not say why: ask the server
            if not said and remote.is_url(href):
                answer = _probe(self.sign(href) if self.sign else href)
                reason += f" ({answer})" if answer else ""
            raise AssetReadError(
                remote.redact(reason)
            ) from exc  # GDAL's messages quote signed URLs
        finally:
            self._messages.local.messages = None

    def _read(
        self,
        href: str,
        region: Affine,
        shape: tuple[int, int],
        out: np.ndarray | None,
        band: int,
        fill: float,
    ) -> np.ndarray:
        src = self._dataset(href)
        offset = pixel_offset(src.transform, region)
        if offset is None:
            raise LcflowError(
                f"{remote.redact(href)}: its pixel grid {tuple(src.transform)[:6]} is not the grid "
                f"its STAC item gives ({tuple(region)[:6]} is not on it)"
            )
        row, col = offset
        if not 1 <= band <= src.count:
            raise LcflowError(f"{remote.redact(href)} holds {src.count} band(s), not a band {band}")
        dtype = src.dtypes[band - 1]
        if out is None:
            out = np.empty(shape, dtype=dtype)
        elif out.dtype != np.dtype(dtype):
            raise LcflowError(f"{remote.redact(href)}: stores {dtype} pixels, {out.dtype} expected")
        h, w = shape
        r0, r1 = max(row, 0), min(row + h, src.height)
        c0, c1 = max(col, 0), min(col + w, src.width)
        if (r0, r1, c0, c1) == (row, row + h, col, col + w):
            return src.read(band, window=((r0, r1), (c0, c1)), out=out)
        out[...] = fill
        if r0 < r1 and c0 < c1:
            out[r0 - row : r1 - row, c0 - col : c1 - col] = src.read(
                band, window=((r0, r1), (c0, c1))
            )
        return out

    def _dataset(self, href: str):
        import rasterio

        with self._lock:
            src, opened = self._open.pop(href, (None, 0.0))
        if src is not None and self.sign is not None and time.monotonic() - opened > self.max_age_s:
            src.close()  # its signature may have expired
            src = None
        if src is None:
            src, opened = rasterio.open(self.sign(href) if self.sign else href), time.monotonic()
        with self._lock:
            self._open[href] = (src, opened)
            while len(self._open) > self.max_open:
                _, (oldest, _) = self._open.popitem(last=False)
                oldest.close()
        return src

    def close(self) -> None:
        logging.getLogger("rasterio._env").removeHandler(self._messages)
        with self._lock:
            while self._open:
                self._open.popitem()[1][0].close()

    def __enter__(self) -> "AssetReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _reason(error: BaseException, messages: list[str]) -> tuple[str, bool]:
    """GDAL's own words (rasterio's 'Read failed. See previous exception' wraps them as causes), and the
    last thing the network said where GDAL's words do not say it; and whether the network said anything."""
    while (earlier := error.__cause__ or error.__context__) is not None:
        error = earlier
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if _NETWORK_MESSAGE.search(reason):
        return reason, True
    network = [m for m in messages if _NETWORK_MESSAGE.search(m)]
    return (f"{reason} ({network[-1].strip()})", True) if network else (reason, False)


def _probe(url: str, timeout_s: float = 10.0) -> str | None:
    """What the server answers to a request for the first byte of ``url``: GDAL does not always say
    what a failed range request got (a tile read as 0 bytes). Never the URL itself (it may be signed)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers={"Range": "bytes=0-0"}), timeout=timeout_s
        ):
            return None  # it answers now
    except urllib.error.HTTPError as exc:
        return f"the server answers HTTP {exc.code} {exc.reason}"
    except (urllib.error.URLError, OSError) as exc:
        return f"the server cannot be reached: {getattr(exc, 'reason', exc)}"


def pixel_offset(
    transform: Affine, region: Affine, tolerance: float = 1e-6
) -> tuple[int, int] | None:
    """(row, col) of ``region``'s first pixel on the grid ``transform``, or None where the two
    grids differ in pixel size or rotation, or are shifted by a fraction of a pixel."""
    if any(
        not math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)
        for a, b in zip(
            (transform.a, transform.b, transform.d, transform.e),
            (region.a, region.b, region.d, region.e),
        )
    ):
        return None
    col, row = ~transform * (region.c, region.f)
    if abs(col - round(col)) > tolerance or abs(row - round(row)) > tolerance:
        return None
    return int(round(row)), int(round(col))


def open_files_allowed() -> int:
    """How many files a reader may keep open: the process's limit on open files, raised to its hard limit
    where that is allowed, less a margin for everything else."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        wanted = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
        if wanted > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
                soft = wanted
            except (ValueError, OSError):
                pass
    return max(16, soft - _SPARE_FILES)
