"""The command that starts a rule's training processes, read from the rule's resources.

Launchers are configuration: the profile sets the resources, the rule calls :func:`command`.
Under the Slurm executor a rule with an ``mpi`` resource is not wrapped in ``srun`` and the job's
``SLURM_*`` task layout is removed before the rule runs, so the launcher repeats the counts itself.
On one machine a profile may give the number of ``ranks`` alone: the distributed backend then picks
its own launcher (horovodrun or torchrun), so that switching backends is one config key.
"""

import shlex
import shutil
from collections.abc import Iterable, Mapping
from typing import Any

from lcflow.common import rank_usage
from lcflow.errors import LcflowError

#: the launcher of ``ranks`` processes on this machine, per distributed backend
LOCAL_LAUNCHERS = {
    "horovod": "horovodrun -np {n} -H localhost:{n} --gloo",
    "torch": "torchrun --standalone --nnodes=1 --nproc-per-node={n} --no-python",
}


def command(
    resources: Mapping[str, Any],
    rule: str = "train",
    backend: str = "horovod",
    container: str = "",
    usage: str = "",
) -> str:
    """``{mpi} --nodes=N --ntasks-per-node=T --cpus-per-task=C`` for an MPI job (``srun`` with
    ``--kill-on-bad-exit=1``), else the
    ``launcher`` resource (``horovodrun -np 2 -H localhost:2 --gloo``, ...), else the ``backend``'s
    launcher of ``ranks`` local processes, else ``env`` (one process).

    Args:
        resources: the rule's resources, as the profile sets them (``mpi``, ``nodes``, ``tasks_per_node``,
            ``tasks``, ``cpus_per_task``, ``launcher``, ``ranks``).
        rule: the rule's name, for errors.
        backend: the distributed backend (horovod, torch): whose local launcher ``ranks`` starts.
        container: the profile's CONTAINER (``apptainer exec --nv IMAGE``): it starts each rank of an MPI
            job in the image, and wraps the launcher of any other job.
        usage: a folder (:func:`lcflow.common.rank_usage.folder`) where every rank writes its CPU time and
            peak memory at exit; empty: none.
    """
    launcher = _launcher(resources, rule, backend, container)
    if not usage:
        return launcher
    return f"env {rank_usage.VARIABLE}={shlex.quote(usage)} {launcher}"


def _launcher(resources: Mapping[str, Any], rule: str, backend: str, container: str) -> str:
    if backend not in LOCAL_LAUNCHERS:
        raise LcflowError(
            f"rule {rule}: distributed backend {backend!r}; expected one of {', '.join(LOCAL_LAUNCHERS)}"
        )
    mpi = resources.get("mpi")
    if not mpi:
        if resources.get("launcher"):
            local = str(resources["launcher"])
        else:
            ranks = int(resources.get("ranks") or 1)
            local = LOCAL_LAUNCHERS[backend].format(n=ranks) if ranks > 1 else "env"
        return f"{container} {local}" if container else local
    per_node, tasks = resources.get("tasks_per_node"), resources.get("tasks")
    if bool(per_node) == bool(tasks):
        raise LcflowError(
            f"rule {rule}: an mpi job needs exactly one of the resources tasks_per_node and tasks "
            f"(got tasks_per_node={per_node}, tasks={tasks})"
        )
    parts = [str(mpi)]
    if (
        program(str(mpi)) == "srun"
        and "kill-on-bad-exit" not in str(mpi)
        and " -K" not in f" {mpi}"
    ):
        # a rank that fails ends the step: the others never wait for it
        parts.append("--kill-on-bad-exit=1")
    if resources.get("nodes"):
        parts.append(f"--nodes={int(resources['nodes'])}")
    parts.append(
        f"--ntasks-per-node={int(per_node)}" if per_node else f"--ntasks={int(tasks or 0)}"
    )
    if resources.get("cpus_per_task"):
        parts.append(f"--cpus-per-task={int(resources['cpus_per_task'])}")
    if container:
        # srun starts the image on every rank's node; the ranks meet through the host's PMIx
        parts.append(container)
    return " ".join(parts)


def threads_per_rank(resources: Mapping[str, Any]) -> int:
    """CPU threads each training process may use: a Slurm task's CPUs, else ``threads_per_rank``
    (0 lets torch choose)."""
    if resources.get("mpi"):
        return int(resources.get("cpus_per_task") or 1)
    return int(resources.get("threads_per_rank") or 0)


def program(command_line: str) -> str | None:
    """The program a launcher or rule command line starts: its first word after ``env`` and its variable
    assignments (``env OMPI_MCA_x=1 srun --mpi=pmix`` starts ``srun``); None for a bare ``env``."""
    words = shlex.split(command_line)
    while words and words[0] == "env":  # env A=1 env B=2 srun: srun
        words = words[1:]
        while words and "=" in words[0] and not words[0].startswith(("-", "/")):
            words = words[1:]
    return words[0] if words else None


def missing_programs(command_lines: Iterable[str], path: str) -> list[str]:
    """The programs of ``command_lines`` that ``path`` (a PATH value) does not hold, in order, once each."""
    missing: list[str] = []
    for line in command_lines:
        name = program(line)
        if name and shutil.which(name, path=path) is None and name not in missing:
            missing.append(name)
    return missing


def configured_launchers(
    resources_by_rule: Mapping[str, Any], backend: str = "horovod"
) -> list[str]:
    """The launcher command lines a profile's set-resources gives any rule (``launcher`` and ``mpi``
    resources, and the ``backend``'s launcher where ``ranks`` is over 1); values may be Snakemake's
    parsed resources, whose ``raw`` is the text the profile gave."""
    found: list[str] = []
    for values in resources_by_rule.values():
        given = {
            key: getattr(values.get(key), "raw", values.get(key))
            if hasattr(values, "get")
            else None
            for key in ("launcher", "mpi", "ranks")
        }
        named = [value for key in ("launcher", "mpi") if isinstance(value := given[key], str)]
        ranks = given["ranks"]
        if not named and ranks is not None and str(ranks).isdigit() and int(ranks) > 1:
            named.append(LOCAL_LAUNCHERS[backend].format(n=int(ranks)))
        found.extend(named)
    return found


#: the account the Slurm profile ships with, which no site has: a real run refuses it before any job
PLACEHOLDER_ACCOUNT = "my-project"


def account_of(default_resources: Mapping[str, Any]) -> str | None:
    """The ``slurm_account`` of a profile's default resources (Snakemake's parsed ones or a plain mapping)."""
    value: Any = default_resources.get("slurm_account") if default_resources else None
    # Snakemake's Resource: the text the profile gave (its value needs a rule)
    if hasattr(value, "raw"):
        value = value.raw
    return None if value is None else str(value).strip("'\"")


def check_before_jobs(
    missing: list[str], python: str, executor: str | None, default_resources: Mapping[str, Any]
) -> None:
    """Before a real run's first job (never in a dry run): the programs the rules start are found, and a
    Slurm run names a real account. Refused in one line that says what to do on a cluster."""
    if missing and missing[0] == "lcflow":
        raise LcflowError(
            f"lcflow is neither beside {python} nor on PATH: run snakemake from the environment lcflow "
            "is installed in (make setup, then .venv/bin/snakemake or source .venv/bin/activate)"
        )
    if missing:
        raise LcflowError(
            f"{missing[0]}, which the profile starts the distributed jobs with, is neither beside "
            f"{python} nor on PATH: run snakemake where the site's launcher is (a Slurm login node, "
            "after `module load` of Slurm or MPI where the site asks for it), or name the launcher "
            "your site has (MPI in profiles/slurm/config.yaml, or LCFLOW_SLURM_MPI)"
        )
    if executor == "slurm" and account_of(default_resources) == PLACEHOLDER_ACCOUNT:
        raise LcflowError(
            f"the Slurm profile's account is still the placeholder {PLACEHOLDER_ACCOUNT!r}: set ACCOUNT "
            "in profiles/slurm/config.yaml, or export LCFLOW_SLURM_ACCOUNT=<your project> (sacctmgr show "
            "assoc user=$USER lists yours)"
        )
