"""The package's shape: stage sub-packages that import only downwards (common < retrieve < labels < train <
tune < maps < assess < synth < the commands' assembly), no import circle, modules a reader can hold in mind."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "workflow" / "lcflow"

#: lowest first; a module may import its own layer and the layers below it, never one above
LAYERS = [
    {"lcflow", "lcflow.errors", "lcflow.defaults"},
    {"lcflow.common"},
    {"lcflow.retrieve"},
    {"lcflow.labels"},
    {"lcflow.train"},
    {"lcflow.tune"},
    {"lcflow.maps"},
    {"lcflow.assess"},
    {"lcflow.synth"},
    {"lcflow.job_resources", "lcflow.launch", "lcflow.site_values", "lcflow.report_file", "lcflow.config", "lcflow.budget"},
    {"lcflow.cli"},
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def imports(name: str) -> set[str]:
    """Every lcflow module ``name`` imports, at the top or inside a function."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in MODULES and t != name}
    return found


GRAPH = {name: imports(name) for name in MODULES}


def layer(name: str) -> int:
    for i, members in enumerate(LAYERS):
        if any(name == m or (m != "lcflow" and name.startswith(m + ".")) for m in members):
            return i
    raise AssertionError(f"{name} is in no layer of {__file__}")


def test_every_module_is_in_a_layer_and_imports_only_downwards():
    upward = [f"{a} -> {b}" for a, targets in GRAPH.items() for b in targets if layer(b) > layer(a)]
    assert not upward, f"imports upward: {upward}"


def test_no_import_circle():
    """Tarjan's strongly connected components of the import graph: each a single module."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"


def test_the_circle_check_finds_a_circle(monkeypatch):
    """The check itself: raster imports atomic; atomic importing raster too makes a circle, and it is found."""
    assert "lcflow.common.atomic" in GRAPH["lcflow.common.raster"]
    monkeypatch.setitem(GRAPH, "lcflow.common.atomic", GRAPH["lcflow.common.atomic"] | {"lcflow.common.raster"})
    with pytest.raises(AssertionError, match="import circles"):
        test_no_import_circle()


def test_few_modules_at_the_top_and_none_too_long():
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert len(top) <= 10, top
    long = {name: n for name, p in MODULES.items() if (n := len(p.read_text().splitlines())) > 450}
    assert not long, f"modules over 450 lines: {long}"


def test_no_function_is_over_80_lines():
    """A function a reader holds in mind: none of the package's is over 80 lines, nested ones included,
    its signature and code counted, its docstring not (an ``Args:`` line for every parameter is asked for,
    and is no code to hold in mind)."""
    long = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = node.body[0]
                doc = first.end_lineno - first.lineno + 1 if ast.get_docstring(node) is not None else 0
                if (lines := node.end_lineno - node.lineno + 1 - doc) > 80:
                    long[f"{name}.{node.name}"] = lines
    assert not long, f"functions over 80 lines: {long}"


def test_each_stage_owns_its_commands():
    """cli.py assembles the stages' commands; it defines none itself."""
    tree = ast.parse(MODULES["lcflow.cli"].read_text())
    handlers = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("cmd_")]
    assert not handlers
    for stage in ("retrieve", "labels", "train", "tune", "maps", "assess", "synth"):
        assert f"lcflow.{stage}.commands" in MODULES


MAP_JOBS = ["lcflow.cli", "lcflow.maps.commands", "lcflow.maps.predict", "lcflow.maps.blend_maps",
            "lcflow.maps.consistent", "lcflow.assess.comparison"]


def test_map_jobs_import_neither_scikit_learn_nor_torch_until_a_model_needs_them():
    """Every tile-year's map, consistency and comparison is a job of its own (a Slurm job on a cluster):
    importing scikit-learn costs about 2 CPU-s and torch as much, which such a job paid even for a model
    that needs neither, and pandas 0.4 CPU-s, which a map never needs (samples tables are read where a
    model is trained or scored). They are imported where a model is loaded or a score computed. (One
    process imports the modules in turn and names the first that brings one in.)"""
    import subprocess
    import sys

    code = ("import importlib, sys\n"
            f"for name in {MAP_JOBS!r}:\n"
            "    importlib.import_module(name)\n"
            "    heavy = sorted(m for m in ('sklearn', 'torch', 'skops', 'pandas') if m in sys.modules)\n"
            "    if heavy:\n"
            "        sys.exit(f'importing {name} imports {heavy}')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


def test_the_code_is_clean_under_ruff():
    """ruff, as pyproject.toml configures it (pycodestyle, pyflakes, isort, bugbear), finds nothing."""
    import subprocess
    import sys

    done = subprocess.run([str(Path(sys.executable).parent / "ruff"), "check", "workflow", "tests", "benchmarks"],
                          cwd=PKG.parents[1], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]


def test_the_tests_mirror_the_package():
    """A stage's tests are found by its name: each sub-package of lcflow has a folder of tests, and no test
    file lies loose at the top of tests/."""
    tests = PKG.parents[1] / "tests"
    stages = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    folders = {p.name for p in tests.iterdir() if (p / "__init__.py").exists() and any(p.glob("test_*.py"))}
    assert {"retrieve", "labels", "train"} <= stages  # the package was read
    assert stages <= folders, f"sub-packages without a tests/ folder: {sorted(stages - folders)}"
    assert not sorted(p.name for p in tests.glob("test_*.py"))


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = node.args
    names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def _compiled(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A numba kernel: its parameters are arrays the compiler types, not settings a reader passes."""
    return any("jit" in ast.unparse(d) or "vectorize" in ast.unparse(d) for d in node.decorator_list)


def _public_functions() -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Module-level functions and methods of public classes whose names do not begin with '_'."""
    found = {}

    def visit(body, prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, f"{prefix}.{node.name}")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                found[f"{prefix}.{node.name}"] = node

    for name, path in MODULES.items():
        if not any(part.startswith("_") and part != "__init__" for part in name.split(".")):
            visit(ast.parse(path.read_text()).body, name)
    return found


def test_no_function_takes_more_than_8_parameters():
    """Settings travel as one object (a stage's settings), not as a parameter each; numba kernels aside."""
    many = {f"{name}.{node.name}" for name, path in MODULES.items() for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(_parameters(node)) > 8
            and not _compiled(node)}
    assert not many, f"functions of more than 8 parameters: {sorted(many)}"


def test_a_public_function_of_more_than_four_parameters_documents_each():
    """Google style: an ``Args:`` section that names every parameter, one line (or more) each."""
    missing, partial = set(), {}
    for name, node in _public_functions().items():
        params = _parameters(node)
        if len(params) <= 4 or _compiled(node):
            continue
        doc = ast.get_docstring(node) or ""
        if "Args:" not in doc:
            missing.add(name)
            continue
        section = doc.split("Args:", 1)[1]
        named = set(re.findall(r"^\s{4}\**(\w+)(?: \([^)]*\))?:", section, re.M))
        if set(params) - named:
            partial[name] = sorted(set(params) - named)
    assert not partial, f"Args: sections that leave parameters out: {partial}"
    assert not missing, f"no Args: section: {sorted(missing)}"


def _stage_map() -> list[dict[str, str]]:
    """README's stage map: one row a numbered stage."""
    text = (ROOT / "README.md").read_text().split("## Stage map", 1)[1]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and line[2:3].isdigit()]
    return [dict(zip(("number", "stage", "rules", "commands", "package", "tests"), row)) for row in rows]


def test_one_numbering_of_stages_names_each_rules_file_after_its_package():
    """README's stage map numbers the stages; each stage's package says its number first and registers the
    commands listed, its rules file is named after it and runs no other, and every rules file but the
    shared ones is a stage's."""
    rows = _stage_map()
    assert [r["number"] for r in rows] == [str(n) for n in range(len(rows))]
    rules_dir = ROOT / "workflow" / "rules"
    for row in rows:
        package = row["package"].strip("`")
        module = MODULES[package]
        assert ast.get_docstring(ast.parse(module.read_text())).startswith(f"Stage {row['number']}"), package
        rules = ROOT / row["rules"].strip("`")
        assert rules.stem == package.removeprefix("lcflow."), (rules, package)
        listed = {c.strip("` ") for c in row["commands"].split(",")}
        run = set(re.findall(r"lcflow -v ([a-z-]+)", rules.read_text()))
        assert run <= listed, (rules.name, run - listed)
        source = MODULES.get(f"{package}.commands", module).read_text()
        assert listed == set(re.findall(r'command\(\s*"([a-z-]+)"', source)), (package, listed)
    stages = {ROOT / r["rules"].strip("`") for r in rows}
    assert set(rules_dir.glob("*.smk")) - stages == {rules_dir / "common.smk", rules_dir / "targets.smk"}
