"""The stage-in's ledger: the files it wrote itself, the only ones it adopts, marks staged or removes.

Neither a manifest's fields (copied from catalogues: a user's own may carry ``lcflow:staged``) nor a file's
place (a user's scenes may be laid out as the stage-in lays them out) says who wrote a file. Each tile-year
folder of a stage-in holds a ledger of the files it published there, each with its inode, size and
modification time as they were when it was renamed into place; a file that does not match its entry (or has
none) is the user's, and is never adopted, marked or removed.
"""

import json
import logging
import os
import threading
from pathlib import Path
from typing import NamedTuple

from lcflow.common.atomic import write_text

log = logging.getLogger("lcflow")

#: the ledger's name in each tile-year folder of ``stage.dir``
LEDGER = ".lcflow-staged.jsonl"


class Stamp(NamedTuple):
    """What identifies a file as the one written: inode, size, modification time (ns)."""

    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> "Stamp":
        st = path.stat()
        return cls(st.st_ino, st.st_size, st.st_mtime_ns)


class Ledger:
    """The files a stage-in wrote under ``folder`` (one tile-year's), by their path relative to it."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.path = self.folder / LEDGER
        self._lock = threading.Lock()
        self._entries: dict[str, Stamp] | None = None

    def _read(self) -> dict[str, Stamp]:
        if self._entries is None:
            entries: dict[str, Stamp] = {}
            if self.path.is_file():
                for line in self.path.read_text().splitlines():
                    try:  # a line a killed stage-in left half-written names no file
                        entry = json.loads(line)
                        entries[entry["file"]] = Stamp(
                            entry["ino"], entry["size"], entry["mtime_ns"]
                        )
                    except (ValueError, KeyError, TypeError):
                        continue
            self._entries = entries
        return self._entries

    def _key(self, path: Path) -> str:
        return Path(path).absolute().relative_to(self.folder.absolute()).as_posix()

    def record(self, written: Path, dest: Path) -> None:
        """Note ``written`` (about to be renamed to ``dest``, which keeps its inode and times) as the
        stage-in's own; appended and flushed before the rename, so a published file is always in it."""
        stamp = Stamp.of(written)
        line = json.dumps({"file": self._key(dest), **stamp._asdict()}) + "\n"
        with self._lock:
            self._read()[self._key(dest)] = stamp
            self.folder.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as out:
                out.write(line)
                out.flush()
                os.fsync(out.fileno())

    def wrote(self, path: Path) -> bool:
        """Whether ``path`` is a file this ledger's stage-in wrote, unchanged since."""
        try:
            key = self._key(path)
            return path.is_file() and self._read().get(key) == Stamp.of(path)
        except (ValueError, OSError):
            return False

    def forget(self, paths: list[Path]) -> None:
        """Drop ``paths`` (removed) from the ledger; the ledger itself goes with its last entry."""
        with self._lock:
            entries = self._read()
            for path in paths:
                entries.pop(self._key(path), None)
            if entries:
                write_text(
                    self.path,
                    "".join(
                        json.dumps({"file": k, **v._asdict()}) + "\n" for k, v in entries.items()
                    ),
                )
            else:
                self.path.unlink(missing_ok=True)


def ledger_of(path: Path, stage_dir: Path) -> Ledger | None:
    """The ledger a file under ``stage_dir`` would be in (its tile-year folder's); None outside it."""
    try:
        parts = Path(path).absolute().relative_to(Path(stage_dir).absolute()).parts
    except ValueError:
        return None
    return Ledger(Path(stage_dir) / parts[0] / parts[1]) if len(parts) > 2 else None
