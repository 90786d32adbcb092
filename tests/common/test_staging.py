"""Outputs are staged beside their final name and renamed: staging names that are lcflow's own, one writer
an output, a stale staging removed only when its writer is gone, a full disk named, a set published whole."""

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import rasterio
import rasterio._err
import rasterio.errors

from lcflow.cli import main
from lcflow.common import atomic, raster
from lcflow.errors import LcflowError

BIN = Path(sys.executable).parent


def _trained(stages, directory: Path) -> Path:
    from lcflow.train import training

    training.train("rf", [str(stages["samples2018"])], directory, {"n_estimators": 5})
    return directory


def test_a_users_files_beside_an_output_survive_and_no_staging_stays(stages, tmp_path, capsys):
    model = _trained(stages, tmp_path / "model")
    out = tmp_path / "maps"
    out.mkdir()
    mine = {".map.tif.swp": "editor", ".map.tif.1": "backup", ".conf.tif.tmp": "notes", ".lcflow": "a name like ours"}
    for name, text in mine.items():
        (out / name).write_text(text)
    args = ["predict", "--model-dir", str(model), "--cube", str(stages["cube2018"]), "--out", str(out / "map.tif"),
            "--confidence", str(out / "conf.tif"), "--timing", str(out / "t.json")]
    assert main(args) == 0, capsys.readouterr().err
    assert main(args) == 0, capsys.readouterr().err  # a rerun over the products too
    assert sorted(p.name for p in out.iterdir()) == sorted([*mine, "map.tif", "map.tif.aux.xml", "map.qml",
                                                            "conf.tif", "t.json"])
    assert {name: (out / name).read_text() for name in mine} == mine


def test_a_long_output_name_is_written_with_a_short_staging_name(tmp_path):
    final = tmp_path / ("m" * 241 + ".tif")  # 245 bytes: a legal name whose old staging name passed 255
    assert len(final.name) == 245 and len(atomic.staging_name(final).name) < 60
    assert len(atomic.lock_path(final).name) < 60
    raster.write_cog(final, np.ones((16, 16), np.uint8), raster.Grid.from_bounds(32631, (0, 0, 160, 160), 10))
    with rasterio.open(final) as ds:
        assert ds.read(1).sum() == 256
    assert [p.name for p in tmp_path.iterdir()] == [final.name]


HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from lcflow.common import atomic
    final = Path(sys.argv[1])
    with atomic.atomic_path(final) as tmp:
        tmp.write_text("half")
        print(tmp, flush=True)
        time.sleep(600)
""")


def test_one_writer_an_output_and_a_dead_writers_staging_is_removed(tmp_path, capsys):
    final = tmp_path / "acc.tsv"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(final)], stdout=subprocess.PIPE, text=True)
    try:
        staging = Path(holder.stdout.readline().strip())
        assert staging.exists() and staging.name.startswith(atomic.staging_prefix(final))
        with pytest.raises(LcflowError, match=f"another process is writing {final} .it holds"):
            atomic.write_text(final, "second")
        (tmp_path / "a.json").write_text("{}")
        code = main(["summarize", "--assessments", str(tmp_path / "a.json"), "--out", str(final)])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and f"another process is writing {final}" in err[0], err
        assert staging.read_text() == "half"  # the live writer's staging is left alone
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    assert staging.exists()  # what a killed writer leaves
    atomic.write_text(final, "after")
    assert final.read_text() == "after" and not staging.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "acc.tsv"]


def _tmpfs(mount: Path) -> bool:
    """A 64 KiB file system of its own (tmpfs) at ``mount``, to fill; False where this process may not mount."""
    mount.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True).returncode == 0


def test_a_full_disk_is_named_with_the_file(stages, tmp_path, capsys):
    small = tmp_path / "small"
    if not _tmpfs(small):
        return _too_large_a_file(tmp_path)
    try:
        noise = np.random.default_rng(0).integers(0, 255, (512, 512), dtype=np.uint8)
        with pytest.raises(LcflowError, match=f"writing {small}/r.tif failed: the disk is full"):
            raster.write_cog(small / "r.tif", noise, raster.Grid.from_bounds(32631, (0, 0, 5120, 5120), 10))
        with pytest.raises(LcflowError, match=f"writing {small}/t.txt failed: the disk is full"):
            atomic.write_text(small / "t.txt", "x" * 200_000)
        code = main(["cube", "--items", str(stages["items2018"]), "--tile", "31UFT", "--year", "2018", "--bounds",
                     "640000,5760000,641280,5761280", "--out", str(small / "cube.tif"), "--valid",
                     str(small / "valid.tif")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1, err
        assert err[0].startswith(f"lcflow cube: error: writing {small}/") and "the disk is full" in err[0], err
        assert list(small.iterdir()) == []  # no staging left to fill it further
    finally:
        subprocess.run(["umount", str(small)], check=True)


TOO_LARGE = textwrap.dedent("""
    import resource, signal, sys
    import numpy as np
    from lcflow.common import atomic, raster
    from lcflow.errors import LcflowError
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
    for write in (lambda: atomic.write_text(sys.argv[1] + "/t.txt", "x" * 200_000),
                  lambda: raster.write_cog(sys.argv[1] + "/r.tif", np.random.default_rng(0).integers(
                      0, 255, (512, 512), dtype=np.uint8), raster.Grid.from_bounds(32631, (0, 0, 5120, 5120), 10))):
        try:
            write()
        except LcflowError as exc:
            print(exc)
""")


@pytest.mark.parametrize("error", [rasterio.errors.RasterioIOError("Write failed. See previous exception for details."),
                                   rasterio._err.CPLE_AppDefinedError(1, 1, "TIFFWriteDirectoryTagData:IO error writing tag data")])
def test_gdal_s_write_errors_are_a_full_disk_where_the_free_space_says_so(tmp_path, monkeypatch, error):
    """GDAL's write errors carry no errno: with under FULL_DISK_BYTES free they are a full disk, named so;
    else a "Write failed" is named with the file, and any other error of GDAL's goes on as it is."""
    final = tmp_path / "r.tif"
    monkeypatch.setattr(atomic, "_free_bytes", lambda directory: atomic.FULL_DISK_BYTES - 1)
    with pytest.raises(LcflowError, match=rf"^writing {final} failed: the disk is full \(No space left on device\); free"):
        with atomic.disk_errors(final):
            raise error
    monkeypatch.setattr(atomic, "_free_bytes", lambda directory: 1 << 40)
    if "Write failed" in str(error):
        with pytest.raises(LcflowError, match=rf"^writing {final} failed: Write failed\. See previous exception for "
                                              r"details\. \(the reason is in the log above\)$"):
            with atomic.disk_errors(final):
                raise error
    else:
        with pytest.raises(type(error)):
            with atomic.disk_errors(final):
                raise error


def _cut(path: Path, nbytes: int) -> None:
    """``path`` less its last ``nbytes``: what a write GDAL failed to finish as it closed the file leaves."""
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size - nbytes)


@pytest.mark.parametrize("free, reason", [(1 << 30, "the file written is incomplete"), (0, "the disk is full")])
def test_a_raster_short_of_its_last_bytes_is_refused_naming_why(tmp_path, monkeypatch, free, reason):
    """GDAL says a write that failed as it closed a file on stderr only; the file opens, its directory
    pointing past its end. check_complete refuses it, as a full disk where the free space says so."""
    grid = raster.Grid.from_bounds(32631, (0, 0, 5120, 5120), 10)
    noise = np.random.default_rng(0).integers(0, 255, (3, 512, 512), dtype=np.uint8)
    raster.write_cog(tmp_path / "whole.tif", noise, grid)
    raster.check_complete(tmp_path / "whole.tif", tmp_path / "whole.tif")  # a whole file passes
    monkeypatch.setattr(atomic, "_free_bytes", lambda directory: free)
    _cut(tmp_path / "whole.tif", 5000)
    with pytest.raises(LcflowError, match=rf"writing {tmp_path}/r.tif failed: {reason} \(block \d+,\d+ of band 1 ends at "
                                          r"byte \d+, past the file's \d+\)"):
        raster.check_complete(tmp_path / "whole.tif", tmp_path / "r.tif")


@pytest.mark.parametrize("command", ["cube", "predict"])
def test_a_raster_a_failed_close_left_short_is_never_published(command, stages, tmp_path, monkeypatch, capsys):
    """Every raster is checked whole before its rename: a cube (its staging GeoTIFF) and a map (its COG)
    left short end the command with exit 2 and one line naming the output, and publish nothing."""
    real = raster.check_complete

    def short_then_check(path: Path, final: Path) -> None:
        _cut(path, 3000)
        real(path, final)

    monkeypatch.setattr(raster, "check_complete", short_then_check)
    out = tmp_path / "out"
    if command == "cube":
        args = ["cube", "--items", str(stages["items2018"]), "--tile", "31UFT", "--year", "2018", "--bands", "B04,B08",
                "--bounds", "640000,5760000,640640,5760640", "--out", str(out / "cube.tif"), "--valid", str(out / "valid.tif")]
    else:
        args = ["predict", "--model-dir", str(_trained(stages, tmp_path / "model")), "--cube", str(stages["cube2018"]),
                "--out", str(out / "map.tif"), "--confidence", str(out / "conf.tif")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"lcflow {command}: error: writing {out}/") and \
        "failed: the file written is incomplete (" in err[0], err
    assert not out.exists()  # nothing published, no staging left, the folder made for it removed


def _too_large_a_file(tmp_path: Path) -> None:
    """Where no file system can be mounted to fill: a file size limit (RLIMIT_FSIZE) refuses the writes."""
    done = subprocess.run([sys.executable, "-c", TOO_LARGE, str(tmp_path)], capture_output=True, text=True, timeout=120)
    said = done.stdout.splitlines()
    assert said[0].startswith(f"writing {tmp_path}/t.txt failed: the file is larger than"), done
    assert said[1].startswith(f"writing {tmp_path}/r.tif failed: "), done
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small"], done


KILLED = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from lcflow.common import atomic
    d = Path(sys.argv[1])
    real = os.replace
    def replace(src, dst):
        real(src, dst)
        os._exit(9)  # killed between two renames
    atomic.os.replace = replace
    pairs = []
    for name in ("proba.tif", "conf.tif", "map.tif"):
        (d / ("new-" + name)).write_text("new " + name)
        pairs.append((d / ("new-" + name), d / name))
    atomic.publish_together(pairs)
""")


def test_a_set_killed_between_renames_lacks_its_mark(tmp_path):
    """The last file of a set (a map, beside its confidence and probabilities) is its mark: the old mark is
    removed first and the new one renamed last, so a reader that finds it finds the whole set."""
    for name in ("proba.tif", "conf.tif", "map.tif"):
        (tmp_path / name).write_text("old " + name)
    done = subprocess.run([sys.executable, "-c", KILLED, str(tmp_path)], timeout=120)
    assert done.returncode == 9
    assert not (tmp_path / "map.tif").exists()
    assert (tmp_path / "proba.tif").read_text() == "new proba.tif"


def test_a_folder_that_cannot_be_written_is_named_not_lcflow_s_lock(tmp_path, monkeypatch, capsys):
    """An output in a read-only folder (a read-only bind mount where this process may mount one; else a
    refused open, as a folder of another user gives): one line naming the output and its folder."""
    import errno
    import os

    folder = tmp_path / "ro"
    folder.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True).returncode == 0
    mounted = mounted and subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], capture_output=True).returncode == 0
    if not mounted:
        real = os.open

        def refused(path, *args, **kwargs):
            if str(path).startswith(str(folder)):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return real(path, *args, **kwargs)

        monkeypatch.setattr(os, "open", refused)
    (tmp_path / "a.json").write_text(json.dumps({"model": "rf"}))
    try:
        for out in (folder / "acc.tsv", folder / "new" / "acc.tsv"):
            code = main(["summarize", "--assessments", str(tmp_path / "a.json"), "--out", str(out)])
            err = capsys.readouterr().err.strip().splitlines()
            why = "is on a read-only file system" if mounted else "is not writable by this user"
            assert code == 2 and err == [f"lcflow summarize: error: cannot write {out}: the folder {out.parent} {why}; "
                                         "name an output folder you can write to"], err
    finally:
        if mounted:
            subprocess.run(["umount", str(folder)], check=True)


def test_a_file_system_without_locks_is_written_without_one_and_keeps_no_lock_file(tmp_path, monkeypatch):
    """Where flock is refused (ENOLCK: some NFS mounts), the output is written unlocked, and the lock file
    opened for it goes again."""
    import errno

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(atomic.fcntl, "flock", no_locks)
    atomic.write_text(tmp_path / "acc.tsv", "whole")
    assert (tmp_path / "acc.tsv").read_text() == "whole" and sorted(p.name for p in tmp_path.iterdir()) == ["acc.tsv"]


def test_a_lock_file_replaced_while_it_was_locked_is_locked_again(tmp_path, monkeypatch):
    """A writer that finished removed its lock file between our open and our flock, and another made a new
    one: the lock we hold is on a file no one else sees, so it is taken again on the file that is there."""
    import fcntl

    real, calls = fcntl.flock, []

    def replaced_once(fd, operation):
        calls.append(fd)
        real(fd, operation)
        if len(calls) == 1:  # the file we locked is gone, a new one stands under its name
            lock = atomic.lock_path(tmp_path / "acc.tsv")
            lock.unlink()
            lock.write_text("")

    monkeypatch.setattr(atomic.fcntl, "flock", replaced_once)
    atomic.write_text(tmp_path / "acc.tsv", "whole")
    assert len(calls) == 2 and (tmp_path / "acc.tsv").read_text() == "whole"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["acc.tsv"]
