"""Every benchmark and study starts: its imports resolve (shared.py, its sibling studies, lcflow) and its
arguments parse, so a moved or renamed module breaks a test rather than the next measurement."""

import os
import subprocess
import sys

import pytest

from ..conftest import ROOT

SCRIPTS = sorted(p for p in [*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "benchmarks" / "studies").glob("*.py")]
                 if p.name not in ("run.py", "shared.py") and not p.name.startswith("_"))


def test_the_scripts_were_found():
    assert {"forest_size.py", "recipe_grid.py", "gpu.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.relative_to(ROOT / "benchmarks").as_posix())
def test_a_benchmark_script_starts(script):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "workflow")}
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=300, env=env,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:"), done.stdout[:500]
