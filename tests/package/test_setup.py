"""Fresh-machine set-up: missing Debian packages are installed where make runs as root, else named in
one command; run with stand-ins for id and apt-get, and a PATH without the build tools."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ROOT

SCRIPT = ROOT / "envs" / "system-deps.sh"


def _bare_path(tmp_path: Path, uid: int) -> dict:
    """A PATH holding the shell's basics and python, an id that says ``uid``, an apt-get that records."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("bash", "env", "dirname", "cat"):
        found = subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip()
        (bin_ / tool).symlink_to(found)
    (bin_ / "python3").symlink_to(sys.executable)
    (bin_ / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (bin_ / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/apt.log\n')
    for f in ("id", "apt-get"):
        (bin_ / f).chmod(0o755)
    return {**os.environ, "PATH": str(bin_)}


def test_without_root_the_missing_packages_are_named_in_one_command(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT), "python3"], env=_bare_path(tmp_path, 1000), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "lcflow needs Debian packages that are missing; run: sudo apt-get install -y g++ cmake openmpi-bin libopenmpi-dev"]
    assert not (tmp_path / "apt.log").exists()


def test_as_root_the_missing_packages_are_installed(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT), "python3", "--", "munge=/nonexistent/munged"],
                          env=_bare_path(tmp_path, 0), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "apt.log").read_text().splitlines()
    assert calls == ["update -qq", "install -y -qq g++ cmake openmpi-bin libopenmpi-dev munge"]


def test_nothing_is_done_where_everything_is_there():
    done = subprocess.run(["bash", str(SCRIPT), sys.executable], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""


def test_the_horovod_wheel_cache_is_keyed_by_its_controllers():
    text = (ROOT / "envs" / "build-horovod.sh").read_text()
    assert 'dir="$CACHE/horovod-$VERSION-torch$flavour-$controllers"' in text
    out = subprocess.run(["bash", str(ROOT / "envs" / "build-horovod.sh"), sys.executable], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "horovod (gloo-mpi) already importable" in out.stdout, out.stdout + out.stderr


def test_a_required_tool_fails_its_tests_instead_of_skipping_them(monkeypatch):
    """Where the run requires a tool (CI), a test that cannot have it fails; elsewhere it skips."""
    from _pytest.outcomes import Failed, Skipped

    from .. import conftest

    monkeypatch.setattr(conftest, "REQUIRED", frozenset({"slurm"}))
    with pytest.raises(Failed, match="LCFLOW_TESTS_REQUIRE names slurm"):
        conftest.missing("slurm", "Slurm is not installed")
    with pytest.raises(Skipped, match="chromium is not installed"):
        conftest.missing("chromium", "chromium is not installed")


def test_readme_s_launcher_lines_work_after_the_step_it_names_before_them():
    """The documentation's launcher lines (docs/models.md) start lcflow under horovodrun and torchrun: from a
    shell whose PATH holds only the system's directories, the one step named before them makes every
    program of those lines found, as the job script of a Slurm site would run them."""
    import re

    block = re.search(r"```sh\n(source [^\n]*)\n(.*?)```", (ROOT / "docs" / "models.md").read_text(), re.DOTALL)
    assert block, "docs/models.md names no step before its launcher lines"
    step = block.group(1).split("#")[0].strip()
    programs = {line.split()[0] for line in block.group(2).splitlines() if line.strip()}
    assert {"lcflow", "horovodrun", "torchrun", "srun"} <= programs
    venv = Path(sys.executable).parent.parent
    checks = " && ".join(f"command -v {p}" for p in sorted(programs - {"srun"}))
    done = subprocess.run(["bash", "-c", f"cd {venv.parent} && {step.replace('.venv', str(venv))} && {checks} && "
                                         "lcflow --help >/dev/null && torchrun --help >/dev/null"],
                          env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert all(line.startswith(str(venv)) for line in done.stdout.split()), done.stdout
