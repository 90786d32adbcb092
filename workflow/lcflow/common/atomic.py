"""Write outputs under a temporary name and rename, so no reader ever sees half a file.

Temporary names start with ``.{final name}.``, beside the output: what a killed job left there is
removed by the next writer of that output. Published files get the permissions the umask gives a new
file (``mkstemp`` alone would leave them readable by their owner only).
"""

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path


def umask() -> int:
    """The process umask, read without changing it where Linux allows."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def share(path: str | os.PathLike) -> None:
    """Give a file the mode a newly created file would get (0666 less the umask)."""
    os.chmod(path, 0o666 & ~umask())


def staging_prefix(final: Path) -> str:
    return f".{final.name}."


def remove_stale(final: str | os.PathLike) -> None:
    """Remove temporary files and staging directories that killed writers of ``final`` left behind."""
    final = Path(final)
    if not final.parent.is_dir():
        return
    for leftover in final.parent.glob(staging_prefix(final) + "*"):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it over ``path``, on error remove it."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(final)
    fd, tmp = tempfile.mkstemp(prefix=staging_prefix(final), suffix=suffix or final.suffix, dir=final.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        share(tmp_path)
        os.replace(tmp_path, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    """Atomically write a text file."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def publish_together(pairs: Sequence[tuple[Path, Path]]) -> None:
    """Rename finished files (temporary, final) into place as one set.

    For several files the old finals are removed first, so an old file never sits beside a new one;
    if a rename fails, the finals already published are removed again: a reader finds the whole new
    set or none of it.
    """
    finals = [final for _, final in pairs]
    if len(set(finals)) != len(finals):
        raise ValueError(f"one file named twice among the outputs {[str(f) for f in finals]}")
    if len(pairs) > 1:
        for final in finals:
            final.unlink(missing_ok=True)
    done: list[Path] = []
    try:
        for tmp, final in pairs:
            share(tmp)
            os.replace(tmp, final)
            done.append(final)
    except BaseException:
        for final in done:
            final.unlink(missing_ok=True)
        raise
