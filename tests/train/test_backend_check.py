"""A distributed backend that cannot start where the jobs run is named before any job is queued: in
`lcflow check-config` and in every Snakemake start (a dry run too) whose profile starts ranks."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lcflow.train.parallel import backend_check

from ..conftest import ROOT, snakemake

#: a sitecustomize that makes this interpreter one without Horovod (as after `pip install -e .` alone)
NO_HOROVOD = '''import sys
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name == "horovod" or name.startswith("horovod."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _Absent())
'''


def _without_horovod(tmp_path: Path) -> dict[str, str]:
    hook = tmp_path / "no-horovod"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(NO_HOROVOD)
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))}


def _fake_horovod(folder: Path, built_against: str | None, extension: bool = True) -> None:
    package = folder / "horovod"
    (package / "torch").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    if extension:
        (package / "torch" / "mpi_lib_v2.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    if built_against:
        (package / "metadata.json").write_text(json.dumps({"pytorch": built_against}))


@pytest.fixture
def fake_horovod(tmp_path, monkeypatch):
    """A folder first on sys.path where a test puts a horovod package of its own."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "horovod", raising=False)
    return tmp_path


def test_an_installed_horovod_built_against_this_torch_passes():
    assert backend_check.problem("horovod") is None and backend_check.problem("torch") is None


def test_horovod_built_against_another_torch_is_named_with_the_rebuild(fake_horovod):
    _fake_horovod(fake_horovod, "2.1.0+cu121")
    said = backend_check.problem("horovod", python="/opt/venv/bin/python")
    assert said.startswith(f"Horovod in {fake_horovod / 'horovod'} was built against torch 2.1.0+cu121, and torch "), said
    assert "`envs/build-horovod.sh /opt/venv/bin/python`" in said


def test_horovod_without_its_torch_extension_is_named(fake_horovod):
    from importlib.metadata import version

    _fake_horovod(fake_horovod, version("torch"), extension=False)
    assert "was built without its PyTorch extension" in backend_check.problem("horovod")


def test_no_horovod_is_refused_by_check_config_and_a_slurm_dry_run_and_the_torch_backend_passes(tmp_path):
    env = _without_horovod(tmp_path)
    lcflow = str(Path(sys.executable).parent / "lcflow")
    checked = subprocess.run([lcflow, "check-config"], env={**os.environ, **env}, capture_output=True, text=True,
                             timeout=120)
    assert checked.returncode != 0, checked.stdout
    lines = checked.stderr.strip().splitlines()
    assert len(lines) == 1 and "Horovod is not installed in " in lines[0], checked.stderr
    assert "`envs/build-horovod.sh " in lines[0] and "distributed.backend: torch" in lines[0]
    planned = snakemake(tmp_path, "-n", profile="slurm", env=env, timeout=300)
    said = planned.stdout + planned.stderr
    assert planned.returncode != 0 and "lcflow: distributed.backend is horovod, but Horovod is not installed" in said, \
        said[-2000:]
    assert "Job stats" not in said and not (tmp_path / "results").exists()
    torch = tmp_path / "torch.yaml"
    torch.write_text("distributed: {backend: torch}\n")
    planned = snakemake(tmp_path, "-n", profile="slurm", env=env, configfile=[ROOT / "config" / "config.yaml", torch],
                        timeout=300)
    assert planned.returncode == 0 and "Job stats" in planned.stdout, (planned.stdout + planned.stderr)[-2000:]


def _container(tmp_path: Path, body: str) -> str:
    """A stand-in for ``apptainer exec IMAGE``: a script that runs its arguments its own way."""
    script = tmp_path / f"container{len(list(tmp_path.glob('container*')))}"
    script.write_text(f"#!/usr/bin/env bash\n{body}\n")
    script.chmod(0o755)
    return f"{script} --nv"


def test_with_a_container_the_check_runs_in_the_image(tmp_path, monkeypatch):
    """The ranks run in the container's image, so its Python is looked at, not the one running Snakemake:
    an image without Horovod is named, an image with it passes, one that cannot start or run lcflow too."""
    hidden = _without_horovod(tmp_path)["PYTHONPATH"]
    bin_dir = Path(sys.executable).parent
    without = _container(tmp_path, f'shift; export PYTHONPATH={hidden}; export PATH={bin_dir}:$PATH; exec "$@"')
    said = backend_check.problem("horovod", container=without)
    assert said.startswith(f"in the container ({without}): distributed.backend is horovod, but Horovod is not "
                           "installed in "), said
    assert backend_check.problem("torch", container=without) is None
    with_it = _container(tmp_path, f'shift; export PATH={bin_dir}:$PATH; exec "$@"')
    assert backend_check.problem("horovod", container=with_it) is None
    broken = _container(tmp_path, 'echo "FATAL: could not open image /p/lcflow.sif: no such file" >&2; exit 255')
    assert backend_check.problem("horovod", container=broken) == (
        f"the container ({broken}) cannot run lcflow: FATAL: could not open image /p/lcflow.sif: no such file "
        "(docs/slurm.md, Install)")
    assert backend_check.problem("horovod", container=str(tmp_path / "absent")).startswith(
        f"the container ({tmp_path / 'absent'}) did not start: ")
