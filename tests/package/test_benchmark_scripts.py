"""Every benchmark and study starts: its imports resolve (shared.py, its sibling studies, lcflow) and its
arguments parse, so a moved or renamed module breaks a test rather than the next measurement. The scripts
start in one process (RUNNER), so the suite pays their imports once."""

import json
import os
import subprocess
import sys

import pytest

from ..conftest import ROOT

SCRIPTS = sorted(p for p in [*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "benchmarks" / "studies").glob("*.py")]
                 if p.name not in ("run.py", "shared.py") and not p.name.startswith("_"))


def test_the_scripts_were_found():
    assert {"forest_size.py", "recipe_grid.py", "gpu.py"} <= {p.name for p in SCRIPTS}


#: every script's ``--help`` in one process, as ``python SCRIPT --help`` runs it (its folder first on sys.path):
#: their imports (torch, lcflow) are paid once, not once a script; prints {script: [exit code, stdout, stderr]}
RUNNER = """
import contextlib, io, json, os, runpy, sys, traceback
results = {}
for path in sys.argv[1:]:
    out, err, saved = io.StringIO(), io.StringIO(), (sys.argv, list(sys.path))
    sys.argv, sys.path[:0] = [path, "--help"], [os.path.dirname(path)]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_path(path, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        code = 1
        err.write(traceback.format_exc())
    finally:
        sys.argv, sys.path[:] = saved
    results[path] = [code, out.getvalue()[:2000], err.getvalue()[-2000:]]
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def helped() -> dict[str, list]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "workflow")}
    done = subprocess.run([sys.executable, "-c", RUNNER, *map(str, SCRIPTS)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.relative_to(ROOT / "benchmarks").as_posix())
def test_a_benchmark_script_starts(script, helped):
    code, out, err = helped[str(script)]
    assert code == 0, err
    assert out.startswith("usage:"), out[:500]


def test_a_script_that_cannot_start_is_caught(tmp_path):
    """The runner reports a script whose import fails, or whose arguments do not parse, as failed."""
    broken, strict = tmp_path / "broken.py", tmp_path / "strict.py"
    broken.write_text("import no_such_module_here\n")
    strict.write_text("import argparse\nargparse.ArgumentParser().parse_args(['--nope'])\n")
    done = subprocess.run([sys.executable, "-c", RUNNER, str(broken), str(strict)], capture_output=True, text=True,
                          timeout=120)
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert results[str(broken)][0] == 1 and "No module named 'no_such_module_here'" in results[str(broken)][2]
    assert results[str(strict)][0] == 2 and "unrecognized arguments: --nope" in results[str(strict)][2]
