"""What makes a received file the asset it was fetched as, before it is published.

Its size and checksum where the item gives them (STAC's ``file:size``, ``file:checksum``); where it gives no
checksum (Earth Search's items), every block decoded: a resume that appended another file's bytes, or a body
cut and patched, fails to decode or ends in the wrong place, where a check of the last block alone passes.
A header that claims more pixels than its item, or more than any scene asset has, is refused before a byte
is decoded (a 10^6 x 10^6 px header asks terabytes of a reader).
"""

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lcflow.errors import LcflowError

log = logging.getLogger("lcflow")

#: bytes read from a file at a time for its checksum
CHUNK = 1 << 20
#: the most pixels a side of a scene asset may have (a Sentinel-2 tile is 10980 px at 10 m)
LARGEST_SIDE_PX = 100_000
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


class NotTheFile(Exception):
    """What was received is not the asset: the attempt starts over."""


def parse_multihash(text: str) -> tuple[Callable[[], "hashlib._Hash"], bytes] | None:
    """(hash constructor, digest) of a hex multihash, None for a function this module does not know;
    ValueError where ``text`` is no multihash (not hex, cut short)."""
    data = bytes.fromhex(text)

    def varint(at: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            if at >= len(data):
                raise ValueError(f"multihash {text[:16]}... ends inside its header")
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


def checksum_of(text: str, what: str) -> tuple[Callable[[], Any], bytes] | None:
    """An asset's ``file:checksum`` parsed; refused in one line, naming the asset, where it is no
    multihash."""
    try:
        return parse_multihash(text)
    except ValueError as exc:
        raise LcflowError(f"{what}: its file:checksum {text!r} is no multihash ({exc})") from None


def verify(
    path: Path,
    what: str,
    size: int | None = None,
    checksum: str | None = None,
    shape: tuple[int, int] | None = None,
) -> None:
    """Raise NotTheFile where ``path`` is not the asset ``what``: a size other than its item's, a checksum
    other than its item's, not a raster (an error page), a header of more pixels than its item's or than
    any scene has, or a block that does not decode.

    Args:
        path: the file received.
        what: the item and asset, named in every message.
        size: STAC's ``file:size``; None: not checked.
        checksum: STAC's ``file:checksum`` (a multihash in hex); None: every block is decoded instead.
        shape: STAC's ``proj:shape`` of the asset; None: only the largest side is checked.
    """
    got = path.stat().st_size
    if size is not None and got != size:
        raise NotTheFile(f"{got} bytes received, the item says {size} (file:size)")
    known = checksum_of(checksum, what) if checksum else None
    if checksum and known is None:
        log.warning(
            "%s: file:checksum uses a hash function lcflow does not know; every block is decoded instead",
            what,
        )
    if known is not None:
        digest = known[0]()
        with path.open("rb") as src:
            while block := src.read(CHUNK):
                digest.update(block)
        if digest.digest() != known[1]:
            raise NotTheFile("its checksum is not the item's file:checksum")
    with path.open("rb") as src:
        head = src.read(12)
    if not any(head.startswith(m) for m in RASTER_MAGIC):
        shown = head.decode("ascii", "replace").strip() or "nothing"
        raise NotTheFile(f"what was received is not a raster (it starts {shown!r})")
    why = _why_not_whole(path, shape, decode=known is None, tiff=head[:2] in (b"II", b"MM"))
    if why:
        raise NotTheFile(f"what was received is not a whole raster ({why})")


def _why_not_whole(
    path: Path, shape: tuple[int, int] | None, decode: bool, tiff: bool
) -> str | None:
    """Why the raster ``path`` is not whole, None where it is: its header's size, a TIFF's block table
    (raster.why_incomplete), and with ``decode`` every block read."""
    import rasterio

    from lcflow.common import raster

    try:
        with rasterio.open(path) as ds:
            height, width = ds.height, ds.width
            if max(height, width) > LARGEST_SIDE_PX:
                return f"its header says {width} x {height} px, more than any scene asset"
            if shape is not None and height * width > shape[0] * shape[1]:
                return (
                    f"its header says {width} x {height} px, its item {shape[1]} x {shape[0]} "
                    "(proj:shape)"
                )
            if tiff and (why := raster.why_incomplete(path)):
                return why
            if decode:
                for _, window in ds.block_windows(1):
                    ds.read(window=window)
    except (OSError, rasterio.errors.RasterioError) as exc:
        return str(exc).replace(str(path), path.name)
    return None
