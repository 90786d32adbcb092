"""Whether the configured distributed backend can start in this environment, known before any job is queued.

A multi-rank job of a backend that is not installed fails with "No module named 'horovod'" only once it
has waited in a GPU queue. The jobs run the Python that runs Snakemake (the rules put its folder first on
PATH), so the check looks in that Python, without importing the backend: Snakemake parses the workflow in
every job too, and importing Horovod loads torch (seconds each time).
"""

import importlib.metadata
import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

#: the documented install of Horovod into an environment (docs/slurm.md, "Install")
HOROVOD_INSTALL = "envs/build-horovod.sh {python}"


#: seconds a container is given to start and answer the check (an image on a slow shared file system)
CONTAINER_TIMEOUT_S = 300


def problem(backend: str, python: str | None = None, container: str = "") -> str | None:
    """Why ``backend``'s ranks cannot start with ``python`` (this interpreter, whose packages are looked
    at), with the command that installs what is missing; None when nothing is missing. With a
    ``container`` command the ranks run in its image, and the check runs there."""
    if container:
        return _problem_in(backend, container)
    python = python or sys.executable
    if backend == "torch":
        return (
            None
            if _spec("torch")
            else (
                f"distributed.backend is torch, but torch is not installed in {python}: "
                f"install lcflow there (pip install -e .)"
            )
        )
    if backend != "horovod":
        return None  # the schema names the backends; a wrong one is refused there
    install = HOROVOD_INSTALL.format(python=python)
    spec = _spec("horovod")
    if spec is None or spec.origin is None:
        return (
            f"distributed.backend is horovod, but Horovod is not installed in {python}: install it with "
            f"`{install}` (docs/slurm.md, Install), or set distributed.backend: torch"
        )
    package = Path(spec.origin).parent
    if not list((package / "torch").glob("mpi_lib_v2*")):
        return (
            f"Horovod in {package} was built without its PyTorch extension: rebuild it with `{install}` "
            "(docs/slurm.md, Install)"
        )
    built = _built_against(package)
    try:
        installed = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if built and installed and built != installed:
        return (
            f"Horovod in {package} was built against torch {built}, and torch {installed} is installed: its "
            f"extension will not load; rebuild it with `{install}` (docs/slurm.md, Install)"
        )
    return None


def _spec(name: str) -> importlib.machinery.ModuleSpec | None:
    """``name``'s import spec, None where it is absent (or an import hook refuses it)."""
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def _built_against(package: Path) -> str | None:
    """The torch version Horovod's build recorded in its metadata.json, None where it recorded none."""
    try:
        return json.loads((package / "metadata.json").read_text()).get("pytorch")
    except (OSError, ValueError, AttributeError):
        return None


def _problem_in(backend: str, container: str) -> str | None:
    """The check run by the image's own Python (``{container} python -c ...``)."""
    code = f"from lcflow.train.parallel.backend_check import problem; print(problem({backend!r}) or '', end='')"
    command = [*shlex.split(container), "python", "-c", code]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=CONTAINER_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the container ({container}) did not start: {exc}"
    if done.returncode:
        said = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"the container ({container}) cannot run lcflow: {said} (docs/slurm.md, Install)"
    said = done.stdout.strip()
    return f"in the container ({container}): {said}" if said else None
