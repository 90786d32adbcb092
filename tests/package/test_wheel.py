"""lcflow as others install it: a wheel built from the checkout, in an environment of its own, checks the
demo's config from another directory (the schema, legend and weights travel as package data)."""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from ..conftest import ROOT


def test_a_wheel_installed_apart_from_the_checkout_checks_a_config(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "workflow" / "lcflow", source / "workflow" / "lcflow",
                    ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w",
                            str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next((tmp_path / "dist").glob("lcflow-*.whl"))
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    package_data = [p.relative_to(ROOT / "workflow").as_posix() for p in (ROOT / "workflow" / "lcflow").rglob("*")
                    if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    assert "lcflow/train/models/presto_weights/default_model.pt" in package_data
    assert sorted(set(package_data) - names) == []  # the schema, the legend, Presto's weights and licence travel
    modules = [p.relative_to(ROOT / "workflow").as_posix() for p in (ROOT / "workflow" / "lcflow").rglob("*.py")
               if "__pycache__" not in p.parts]
    assert sorted(set(modules) - names) == []  # every module, the sub-packages' too
    # a fresh environment that sees this one's libraries (not its editable lcflow) and installs the wheel
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    uv = Path(sys.executable).parent / "uv"
    done = subprocess.run([str(uv), "pip", "install", "--quiet", "--no-deps", "--python", str(python), str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing but the environment's own paths
    where = subprocess.run([str(python), "-c", "import lcflow; print(lcflow.__file__)"], cwd=elsewhere, env=env,
                           capture_output=True, text=True, timeout=120)
    assert where.stdout.strip().startswith(site), where  # the wheel's lcflow, not the checkout's
    checked = subprocess.run([str(env_dir / "bin" / "lcflow"), "check-config", "--configfile",
                              str(ROOT / "config" / "config.yaml"), "--directory", str(ROOT)], cwd=elsewhere,
                             env=env, capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0 and checked.stdout.startswith("config OK: 2 tile(s)"), checked.stderr
    bare = subprocess.run([str(env_dir / "bin" / "lcflow"), "check-config"], cwd=elsewhere, env=env,
                          capture_output=True, text=True, timeout=300)
    assert bare.returncode == 2 and "name the config to check: --configfile" in bare.stderr


def test_the_python_dependencies_are_declared_once_in_pyproject():
    """The cluster's conda environment installs lcflow with pip, which reads pyproject's dependencies; a
    Python package named there too would be a second list that drifts."""
    import tomllib

    import yaml

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {d.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip().lower() for d in declared}
    env = yaml.safe_load((ROOT / "envs" / "lcflow.yaml").read_text())["dependencies"]
    conda = {d.split(">")[0].split("<")[0].split("=")[0].strip().lower() for d in env if isinstance(d, str)}
    pip = next(d["pip"] for d in env if isinstance(d, dict))
    assert names and "numpy" in names  # the parse found pyproject's list
    assert not conda & (names | {"pytorch", "matplotlib-base"}), conda & names
    assert pip == ["-e ../"]
