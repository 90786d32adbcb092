"""What a stage-in checks before any byte is fetched: its folder, the files already there, the items' fields.

A ``stage.dir`` must be a folder of the stage-in's own: one that holds the catalogue's files, or files the
stage-in did not write where it would write (:mod:`lcflow.retrieve.stage_ledger`), is refused in one line,
since a rerun there would take them for staged copies and ``stage.keep: false`` remove what it took.
"""

import math
import os
from pathlib import Path

from lcflow.errors import LcflowError
from lcflow.retrieve import remote
from lcflow.retrieve.search import manifest_source
from lcflow.retrieve.stage_ledger import Ledger


def file_size(fields: dict, what: str) -> int | None:
    """STAC's ``file:size`` of an asset: a whole number of bytes; refused in one line where it is not."""
    size = fields.get("file:size")
    if size is None:
        return None
    if (
        isinstance(size, bool)
        or not isinstance(size, int | float)
        or not math.isfinite(size)
        or size < 0
        or size != int(size)
    ):
        raise LcflowError(f"{what}: its file:size {size!r} is not a number of bytes")
    return int(size)


def layout_shape(fields: dict) -> tuple[int, int] | None:
    """The rows and columns an asset's ``proj:shape`` says, None where it says none."""
    shape = fields.get("proj:shape")
    if isinstance(shape, list | tuple) and len(shape) == 2 and all(type(v) is int for v in shape):
        return shape[0], shape[1]
    return None


def check_unique(dests: list[tuple[str, str, Path]], tile: str, year: int) -> None:
    """Refuse two assets (item id, asset key, local copy) staged to one file: an item listed twice."""
    seen: dict[Path, tuple[str, str]] = {}
    for item_id, key, dest in dests:
        if dest in seen:
            raise LcflowError(
                f"tile {tile} {year}: item {seen[dest][0]} asset {seen[dest][1]} and item {item_id} "
                f"asset {key} would be staged to one file ({dest}): the manifest lists an item "
                "twice; search again"
            )
        seen[dest] = (item_id, key)


def stage_dir(configured: str | Path) -> Path:
    """``stage.dir`` as an absolute path; refused in one line where it is a link to nothing, or no folder."""
    folder = Path(configured).absolute()
    if folder.is_symlink() and not folder.exists():
        raise LcflowError(
            f"stage.dir {configured} is a link to {os.readlink(folder)}, which does not exist: "
            "make that folder, or point stage.dir at one"
        )
    if folder.exists() and not folder.is_dir():
        raise LcflowError(f"stage.dir {configured} is a file, not a folder")
    return folder


def check_apart(items, manifest: str | Path, folder: Path) -> None:
    """Refuse a ``stage.dir`` that holds the catalogue's own files: a rerun there would take them for
    staged copies (and ``stage.keep: false`` remove what it took)."""
    source = manifest_source(manifest)
    local = [("its catalogue", source)] if source and not remote.is_url(source) else []
    local += [
        (f"item {item.id} asset {key}", str(asset.href))
        for item in items
        for key, asset in item.assets.items()
        if not remote.is_url(str(asset.href))
    ]
    for what, href in local:
        path = Path(href.removeprefix("file://")).absolute()
        if path.resolve().is_relative_to(folder.resolve()) or path.is_relative_to(folder):
            raise LcflowError(
                f"stage.dir {folder} holds the catalogue's own files ({what}: {path}): set stage.dir to "
                "a folder of the stage-in's own, outside the catalogue"
            )


def check_own(dests: list[Path], ledger: Ledger, what: str) -> None:
    """Refuse, before any download, destinations that hold files the stage-in did not write (a user's own
    scenes, laid out alike): they are never adopted as staged, never marked, never removed."""
    foreign = [dest for dest in dests if dest.exists() and not ledger.wrote(dest)]
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise LcflowError(
            f"{what}: {foreign[0]}{more} is there already, and lcflow stage did not write it (it is not "
            f"in {ledger.path}): move it away, or set stage.dir to a folder of the stage-in's own; "
            "nothing was changed"
        )
