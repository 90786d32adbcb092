"""mypy on the package (pyproject.toml's [tool.mypy], the mypy release the test extra pins): no module gains
a type error, and the modules that still have some are listed with how many, a list that only shrinks until
it is empty (a module with fewer is a warning to lower it)."""

import subprocess
import sys
import warnings
from collections import Counter

from ..conftest import ROOT

#: type errors mypy still finds, by module; a module fixed leaves the list, none joins it
KNOWN_ERRORS = {
    "lcflow/assess/design.py": 10,
    "lcflow/labels/alignment.py": 4,
    "lcflow/maps/consistent.py": 5,
    "lcflow/maps/predict.py": 3,
    "lcflow/maps/quicklook.py": 9,
    "lcflow/retrieve/asset_reader.py": 9,
    "lcflow/train/blend.py": 6,
    "lcflow/train/model_dir.py": 3,
    "lcflow/train/training.py": 9,
}


def test_mypy_finds_no_type_error_beyond_the_known_ones(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--no-error-summary"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    errors = [line for line in done.stdout.splitlines() if ": error: " in line]
    assert done.returncode in (0, 1) and not done.stderr.strip(), done.stderr[-2000:]
    found = Counter(line.split(":", 1)[0].removeprefix("workflow/") for line in errors)
    more = {m: n for m, n in found.items() if n > KNOWN_ERRORS.get(m, 0)}
    assert not more, "new type errors:\n" + "\n".join(e for e in errors if e.split(":", 1)[0].removeprefix("workflow/") in more)
    fewer = {m: (found.get(m, 0), n) for m, n in KNOWN_ERRORS.items() if found.get(m, 0) < n}
    if fewer:  # fixed ones (or another release's stubs): the list is lowered by hand, a red suite would not help
        warnings.warn(f"fewer type errors than KNOWN_ERRORS says (found, listed): lower the list: {fewer}", stacklevel=1)
