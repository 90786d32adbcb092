"""The package is laid out by ``ruff format`` at 100 columns (pyproject.toml), but for the modules its
``[tool.ruff.format] exclude`` lists: each of those, formatted, would run over a cap of the package's (450
lines a module, 80 a function), and is formatted once it is divided. The list only shrinks."""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

from ..conftest import ROOT

RUFF = str(Path(sys.executable).parent / "ruff")
PACKAGE = "workflow/lcflow/"


def _not_formatted_yet() -> list[str]:
    exclude = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["format"]["exclude"]
    return [p for p in exclude if p.startswith(PACKAGE)]


def _over_a_cap(source: str) -> list[str]:
    """What a module's text runs over: the module cap, or a function's (its docstring not counted)."""
    over = [f"{n} lines"] if (n := len(source.splitlines())) > 450 else []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0]
            doc = first.end_lineno - first.lineno + 1 if ast.get_docstring(node) is not None else 0
            if (lines := node.end_lineno - node.lineno + 1 - doc) > 80:
                over.append(f"{node.name}: {lines} lines")
    return over


def test_the_package_is_formatted():
    done = subprocess.run([RUFF, "format", "--check", "workflow"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_module_left_unformatted_would_run_over_a_cap_formatted():
    """So that the list shrinks: a module divided enough to be formatted within the caps leaves it."""
    fits = {}
    for path in _not_formatted_yet():
        source = (ROOT / path).read_text()
        done = subprocess.run([RUFF, "format", "--stdin-filename", "x.py", "-"], input=source, cwd=ROOT,
                              capture_output=True, text=True, timeout=60, check=True)
        if not _over_a_cap(done.stdout):
            fits[path] = len(done.stdout.splitlines())
    assert not fits, f"within the caps once formatted: take them off pyproject.toml's list and format them: {fits}"


def test_the_cap_check_finds_a_long_function():
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    assert _over_a_cap(f'def f():\n    """Doc."""\n{body}\n') == ["f: 81 lines"]
    assert _over_a_cap("x = 1\n" * 451) == ["451 lines"]
    assert _over_a_cap("x = 1\n" * 450) == []
