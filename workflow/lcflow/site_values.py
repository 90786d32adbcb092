"""The Slurm profile's SITE VALUES, read as data and checked before Snakemake queues anything.

Each value comes from ``LCFLOW_SLURM_<NAME>`` where exported, else from the profile's default. Values that
reach a shell line are checked, since the Slurm executor appends the extra sbatch options unquoted to a
``shell=True`` call on the login node, and the container and launcher words start every rank: they may hold
no shell metacharacter. ``JOB_SETUP`` is shell by design (``module load ...; export ...``, run first in
every job on its node): it is parsed with ``bash -n``, so a syntax error is said at the start rather than
in every job. Numbers are whole and within their bounds. A refusal is one line naming the value.
"""

import functools
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Mapping

from lcflow.errors import LcflowError

#: whole-number values and their bounds
NUMBERS: dict[str, tuple[int, int]] = {
    "GPUS_PER_NODE": (0, 64),
    "GPU_MEM_MB": (0, 100_000_000),
    "TRAIN_NODES": (1, 10_000),
    "PREDICT_NODES": (1, 10_000),
    "TASKS_PER_NODE": (1, 1024),
    "CPUS_PER_TASK": (1, 4096),
    "CPU_CORES": (1, 4096),
    "NODE_CORES": (1, 4096),
    "NODE_MEM_MB": (1, 100_000_000),
    "TRAIN_MINUTES": (1, 525_600),
    "STAGE_JOBS": (1, 1000),
    "FOREST_MAP_GPUS": (0, 64),
}
#: values passed quoted (sbatch -C and --qos by the executor, SBATCH_EXTRA word by word by the profile):
#: Slurm's own operators and host lists are allowed there
QUOTED = {
    "GPU_CONSTRAINT": r"[\w .,:=+@%/&|!*\[\]()-]*",
    "QOS": r"[\w.,:=+@%/-]*",
    "SBATCH_EXTRA": r"[\w .,:=+@%/\[\]-]*",
}
#: everything else that reaches a command line: words of letters, digits and ``_ . , : = + @ % / -``
WORDS = r"[\w .,:=+@%/-]*"
#: the value that is shell: only its syntax is checked
SHELL = "JOB_SETUP"
#: a profile's values that name one of a few commands
CHOICES = {"STATUS_COMMAND": ("sacct", "squeue"), "BILLING": ("core", "node")}


def value(name: str, default: str, env: Mapping[str, str] | None = None) -> int | str:
    """The site value ``name`` (``LCFLOW_SLURM_NAME`` where set, else ``default``), checked: a whole number
    for NUMBERS, text otherwise."""
    return check(name, (os.environ if env is None else env).get(f"LCFLOW_SLURM_{name}", default))


def check(name: str, text: str) -> int | str:
    """``text`` as the site value ``name``; LcflowError in one line where it is not one."""
    where = f"site value {name}={text!r} (LCFLOW_SLURM_{name}, or SITE VALUES in profiles/slurm/config.yaml)"
    if name in NUMBERS:
        low, high = NUMBERS[name]
        if not re.fullmatch(r"\s*\d+\s*", text) or not low <= int(text) <= high:
            raise LcflowError(f"{where}: not a whole number in [{low}, {high}]")
        return int(text)
    if name in CHOICES:
        if text not in CHOICES[name]:
            raise LcflowError(f"{where}: one of {', '.join(CHOICES[name])}")
        return text
    if name == SHELL:
        _check_shell(text, where)
        return text
    allowed = QUOTED.get(name, WORDS)
    if not re.fullmatch(allowed, text):
        bad = sorted({c for c in text if not re.fullmatch(allowed, c)})
        shown = " ".join(repr(c) for c in bad)
        raise LcflowError(
            f"{where}: holds {shown}, which a shell would run or expand; give options and paths as plain "
            "words (shell set-up goes in JOB_SETUP)"
        )
    return text


def _check_shell(text: str, where: str) -> None:
    """Refuse a JOB_SETUP that bash cannot parse."""
    why = _bash_syntax_error(text)
    if why:
        raise LcflowError(f"{where}: not shell bash can parse ({why})")


@functools.lru_cache(maxsize=8)
def _bash_syntax_error(text: str) -> str | None:
    """What ``bash -n`` says of ``text``, None where it parses (or there is no bash). Kept per text: the
    profile and the workflow check the same JOB_SETUP as Snakemake starts."""
    bash = shutil.which("bash")
    if not text.strip() or bash is None:
        return None
    done = subprocess.run(
        [bash, "-n", "-c", text],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    if not done.returncode:
        return None
    said = done.stderr.strip().splitlines()
    told = next((line for line in said if "syntax error" in line), said[-1] if said else "")
    return told.split(": ", 2)[-1] if told else f"bash -n exit {done.returncode}"


def site(name: str, default: str) -> int | str:
    """The profile's reader (``__definitions__``): the value, or Snakemake ended at once with the one line
    (a SystemExit, not a template traceback)."""
    try:
        return value(name, default)
    except LcflowError as exc:
        raise SystemExit(f"profiles/slurm: {exc}") from None


def check_job_values(
    env: Mapping[str, str], launchers: Iterable[str], extras: Iterable[str]
) -> None:
    """What reaches the jobs' shell lines from any profile, checked where Snakemake starts (a profile of a
    site's own may not use :func:`site`): the container and job set-up in the environment, the launchers
    (``mpi`` and ``launcher`` resources), and the extra sbatch options (``slurm_extra``), each of which
    must be plain words or quoted as ``shlex.join`` quotes them. LcflowError in one line where one is not."""
    if env.get("LCFLOW_CONTAINER"):
        check("CONTAINER", env["LCFLOW_CONTAINER"].strip())
    if env.get("LCFLOW_JOB_SETUP"):
        check("JOB_SETUP", env["LCFLOW_JOB_SETUP"])
    for launcher in launchers:
        check("MPI", launcher)
    for extra in extras:
        text = _resource_text(extra)
        try:
            quoted = shlex.join(shlex.split(text))
        except ValueError:
            quoted = None
        if text and quoted != text and not re.fullmatch(WORDS, text):
            raise LcflowError(
                f"slurm_extra {text!r}: the Slurm executor passes it to a shell unquoted; give plain "
                "words, or each word quoted as shlex.join quotes it (profiles/slurm does that with "
                "SBATCH_EXTRA)"
            )


def _resource_text(value: object) -> str:
    """A resource's text as the job gets it: Snakemake's parsed resource's ``raw``, a Python string literal
    (a profile's ``?repr(...)``) evaluated."""
    import ast

    text = str(getattr(value, "raw", value)).strip()
    try:
        parsed = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return parsed if isinstance(parsed, str) else text


def slurm_extras(resource_settings: object) -> list[object]:
    """The ``slurm_extra`` resources of Snakemake's resource settings: the default's and each rule's."""
    found = []
    default = getattr(resource_settings, "default_resources", None)
    if default is not None and hasattr(default, "get") and default.get("slurm_extra") is not None:
        found.append(default.get("slurm_extra"))
    for values in (getattr(resource_settings, "overwrite_resources", None) or {}).values():
        if hasattr(values, "get") and values.get("slurm_extra") is not None:
            found.append(values.get("slurm_extra"))
    return found
