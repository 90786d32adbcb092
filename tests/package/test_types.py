"""mypy on the package (pyproject.toml's [tool.mypy], the mypy release the test extra pins) finds no type
error."""

import subprocess
import sys

from ..conftest import ROOT


def test_mypy_finds_no_type_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    errors = [line for line in done.stdout.splitlines() if ": error: " in line]
    assert done.returncode in (0, 1) and not done.stderr.strip(), done.stderr[-2000:]
    assert not errors and done.returncode == 0, "type errors:\n" + "\n".join(errors)
