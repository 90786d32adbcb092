"""Write outputs under a temporary name and rename, so no reader ever sees half a file.

Staging files and directories sit beside their output, named ``.lcflow-{key}-...`` where ``key`` is a
digest of the output's name: short whatever the output's name, and never a name a user's own file
(``.map.tif.swp``) would have. While it writes, a writer holds a lock on ``.lcflow-{key}.lock``
(``flock``): a second writer of the same output is refused at once, and staging that no live writer
owns (a killed job's) is removed by the next writer. Published files get the permissions the umask
gives a new file (``mkstemp`` alone would leave them readable by their owner only).
"""

import contextlib
import errno
import fcntl
import hashlib
import os
import secrets
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

from lcflow.errors import LcflowError

STAGING_MARK = ".lcflow-"
#: a staging name keeps its output's suffix (a PNG writer goes by it) when the suffix is at most this long
_SUFFIX_BYTES = 16


class WriterBusy(LcflowError):
    """Another live process holds the writer lock of an output."""


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


def staging_key(final: Path) -> str:
    """The digest of an output's name that its staging names carry (16 hex digits)."""
    return hashlib.sha1(final.name.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def staging_prefix(final: Path) -> str:
    """What every staging file and directory of ``final`` is named with, beside it."""
    return f"{STAGING_MARK}{staging_key(final)}-"


def staging_name(final: Path, tag: str = "") -> Path:
    """A fresh staging path beside ``final``: its prefix, this process, a random part, the output's suffix."""
    suffix = final.suffix if len(final.suffix.encode()) <= _SUFFIX_BYTES else ""
    return (
        final.parent / f"{staging_prefix(final)}{tag or os.getpid()}-{secrets.token_hex(4)}{suffix}"
    )


def lock_path(final: Path) -> Path:
    return final.parent / f"{STAGING_MARK}{staging_key(final)}.lock"


#: the writer locks this process holds: lock file -> (descriptor, depth), so a writer may nest
_held: dict[Path, list[int]] = {}


@contextlib.contextmanager
def writer_lock(final: str | os.PathLike) -> Iterator[None]:
    """Hold the lock of ``final``'s writer; refuse (LcflowError) when another process holds it.

    On entering, staging of ``final`` that no live writer owns is removed. Re-entrant within a process.
    """
    final = Path(final)
    lock = lock_path(final)
    key = Path(os.path.abspath(lock))
    if key in _held:
        _held[key][1] += 1
        try:
            yield
        finally:
            _held[key][1] -= 1
        return
    try:
        made = _make_parents(final.parent)
    except OSError as exc:
        raise _unwritable(final, exc) from None
    try:
        try:
            fd = _acquire(lock, final)
        except OSError as exc:
            raise _unwritable(final, exc) from None
        _held[key] = [fd, 1]
        try:
            _remove_stale(final)
            yield
        finally:
            del _held[key]
            if fd >= 0:
                with contextlib.suppress(OSError):
                    lock.unlink()
                os.close(fd)
    finally:
        for (
            directory
        ) in made:  # the folders made for the lock alone, where nothing was written into them
            with contextlib.suppress(OSError):
                directory.rmdir()


def _unwritable(final: Path, exc: OSError) -> Exception:
    """A folder that cannot take an output: one line naming the output and its folder, not lcflow's lock."""
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = (
            "is on a read-only file system"
            if exc.errno == errno.EROFS
            else "is not writable by this user"
        )
        return LcflowError(
            f"cannot write {final}: the folder {final.parent} {why}; name an output folder you can "
            "write to"
        )
    return exc


def _make_parents(directory: Path) -> list[Path]:
    """Make ``directory`` and its missing parents; the ones made, deepest first."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        if directory.parent == directory:
            break
        directory = directory.parent
    for d in reversed(missing):
        d.mkdir(exist_ok=True)
    return missing


def _acquire(lock: Path, final: Path) -> int:
    """An open descriptor of ``lock`` locked by this process (-1 where the file system has no locks)."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666 & ~umask())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WriterBusy(
                f"another process is writing {final} (it holds {lock}): wait for it to finish, or "
                "stop it and run again"
            ) from None
        except (
            OSError
        ) as exc:  # ENOLCK, EOPNOTSUPP: a file system without flock; write without the lock
            os.close(fd)
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                lock.unlink(missing_ok=True)  # no lock to hold: its file would only stay behind
                return -1
            raise
        try:  # the lock is ours unless its file was removed (by a writer finishing) before we locked it
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _remove_stale(final: Path) -> None:
    """Remove the staging files and directories of ``final`` (its writer's lock is held: none is live)."""
    if not final.parent.is_dir():
        return
    lock = lock_path(final).name
    for leftover in final.parent.glob(staging_prefix(final) + "*"):
        if leftover.name == lock:
            continue
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


def remove_stale(final: str | os.PathLike) -> None:
    """Remove the staging that killed writers of ``final`` left behind (none while another writes it)."""
    with writer_lock(final):
        pass


@contextlib.contextmanager
def staging_dir(final: str | os.PathLike, tag: str = "") -> Iterator[Path]:
    """A fresh staging directory beside ``final``, removed on leaving; ``final``'s writer lock is held."""
    final = Path(final)
    with writer_lock(final):
        path = staging_name(final, tag)
        path.mkdir()
        try:
            # inside: the free space is judged before the staging is removed
            with disk_errors(final):
                yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it over ``path``, on error remove it."""
    final = Path(path)
    with writer_lock(final):
        tmp_path = staging_name(final)
        if suffix and suffix != final.suffix:
            tmp_path = tmp_path.with_name(tmp_path.name + suffix)
        tmp_path.touch()
        try:
            with disk_errors(final):
                yield tmp_path
                share(tmp_path)
                os.replace(tmp_path, final)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp_path.unlink()
            raise


@contextlib.contextmanager
def removed_if_left_empty(directory: Path) -> Iterator[None]:
    """A folder the block makes (an output directory), removed again where the block fails or is
    interrupted leaving it empty; one with anything in it (a checkpoint to resume from) stays."""
    made = not directory.exists()
    try:
        yield
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                directory.rmdir()  # refused unless empty
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    """Atomically write a text file."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


#: errno values that mean the disk (or the user's share of it) cannot take the file
_NO_SPACE = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EFBIG: "the file is larger than this system lets a process write",
}


#: free bytes under which a failed write is put down to a full disk (GDAL reports only "Write failed")
FULL_DISK_BYTES = 1 << 20


@contextlib.contextmanager
def disk_errors(final: Path) -> Iterator[None]:
    """A full disk while writing ``final`` ends in one line naming the file, not a library's message."""
    try:
        yield
    except Exception as exc:
        code = getattr(exc, "errno", None)
        if code in _NO_SPACE:
            raise _disk_error(final, _NO_SPACE[code], os.strerror(code)) from exc
        # GDAL's write errors (RasterioIOError "Write failed", CPLE_AppDefinedError "IO error writing tag
        # data" as it closes a file) carry no errno: the free space tells
        write_failed = "write failed" in str(exc).lower()
        if write_failed or type(exc).__module__.startswith("rasterio"):
            if _free_bytes(final.parent) < FULL_DISK_BYTES:
                raise _disk_error(
                    final, _NO_SPACE[errno.ENOSPC], os.strerror(errno.ENOSPC)
                ) from exc
            if write_failed:
                raise LcflowError(
                    f"writing {final} failed: {exc} (the reason is in the log above)"
                ) from exc
        raise


def _free_bytes(directory: Path) -> int:
    try:
        st = os.statvfs(directory)
    except OSError:
        return 1 << 62
    return st.f_bavail * st.f_frsize


def incomplete(final: Path, detail: str) -> LcflowError:
    """The error of a file found incomplete once written: a full disk where the free space says so."""
    if _free_bytes(final.parent) < FULL_DISK_BYTES:
        return _disk_error(final, _NO_SPACE[errno.ENOSPC], detail)
    return LcflowError(f"writing {final} failed: the file written is incomplete ({detail})")


def _disk_error(final: Path, meaning: str, detail: str) -> LcflowError:
    return LcflowError(
        f"writing {final} failed: {meaning} ({detail}); free space in {final.parent} and run again"
    )


def publish_together(pairs: Sequence[tuple[Path, Path]]) -> None:
    """Rename finished files (temporary, final) into place as one set, the last pair's file last.

    For several files the old finals are removed first, so an old file never sits beside a new one; if
    a rename fails, the finals already published are removed again. The last file is the set's mark: a
    reader that finds it finds the whole set (a process killed between renames leaves it absent).
    """
    finals = [final for _, final in pairs]
    if len(set(finals)) != len(finals):
        raise ValueError(f"one file named twice among the outputs {[str(f) for f in finals]}")
    if len(pairs) > 1:
        for final in reversed(finals):  # the mark first: never a mark beside an incomplete set
            final.unlink(missing_ok=True)
    done: list[Path] = []
    try:
        for tmp, final in pairs:
            with disk_errors(final):
                share(tmp)
                os.replace(tmp, final)
            done.append(final)
    except BaseException:
        for final in done:
            final.unlink(missing_ok=True)
        raise
