"""The package is laid out by ``ruff format`` at 100 columns (pyproject.toml), every module of it, within the
package's caps of 450 lines a module and 80 a function (tests/package/test_package_layout.py)."""

import subprocess
import sys
import tomllib
from pathlib import Path

from ..conftest import ROOT

RUFF = str(Path(sys.executable).parent / "ruff")


def test_the_package_is_formatted():
    done = subprocess.run([RUFF, "format", "--check", "workflow"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_module_of_the_package_is_left_out_of_the_format():
    exclude = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["format"]["exclude"]
    assert not [p for p in exclude if p.startswith("workflow")], exclude


def test_the_format_check_finds_a_module_laid_out_otherwise(tmp_path):
    """The check itself: a module written wider than 100 columns is one ruff format would change."""
    module = tmp_path / "wide.py"
    module.write_text("x = [" + ", ".join(str(i) for i in range(60)) + "]\n")
    done = subprocess.run([RUFF, "format", "--check", "--config", str(ROOT / "pyproject.toml"), str(module)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "would be reformatted" in done.stdout + done.stderr
