"""What a command reads and writes, checked before any work: no output may be one of its inputs.

Every path option of a command is declared with its role (:func:`role`: an input or an output, a file or
a directory). Before the command runs, :func:`check` refuses, in one line naming both options:
an output that is an input (through symbolic or hard links too), an output inside an input directory
(a model's ``model.json``, a study's journal), an input inside an output directory, two outputs that
are one file, an output file that is a directory and an output directory that is a file.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from lcflow.errors import LcflowError


@dataclass(frozen=True)
class Role:
    """How a command uses a path: ``output`` or not, a ``directory`` or a file. An input directory may
    name the members it reads (``reads``; None: all of it), when the command's outputs may sit beside them."""

    output: bool
    directory: bool = False
    reads: tuple[str, ...] | None = None

    @property
    def what(self) -> str:
        return f"{'output' if self.output else 'input'} {'directory' if self.directory else 'file'}"


@dataclass(frozen=True)
class Named:
    """One path a command uses: the option (or description) that gave it, the path, its role."""

    option: str
    path: str
    role: Role


def role(kind: Role) -> Callable[[str], str]:
    """An argparse ``type`` that keeps the text as it is and marks the option with ``kind``."""

    def parse(text: str) -> str:
        return text

    parse.role = kind  # type: ignore[attr-defined]
    parse.__name__ = kind.what.replace(" ", "_")
    return parse


INPUT_FILE = Role(output=False)
INPUT_DIR = Role(output=False, directory=True)
OUTPUT_FILE = Role(output=True)
OUTPUT_DIR = Role(output=True, directory=True)

input_file, input_dir = role(INPUT_FILE), role(INPUT_DIR)
output_file, output_dir = role(OUTPUT_FILE), role(OUTPUT_DIR)


def is_remote(path: str) -> bool:
    """A URL (http, s3, ...) or a GDAL virtual path: nothing a local write could destroy."""
    return "://" in path or path.startswith("/vsi")


def declared(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[Named]:
    """The paths ``args`` gives to the options ``parser`` declared with a role, and any the command implies
    (``implied_paths``, set with ``parser.set_defaults``: a function of the args)."""
    found: list[Named] = []
    for action in parser._actions:  # argparse keeps no public list of a parser's options
        kind = getattr(action.type, "role", None)
        value = getattr(args, action.dest, None)
        if kind is None or value is None:
            continue
        option = action.option_strings[-1] if action.option_strings else action.dest
        for path in value if isinstance(value, list) else [value]:
            found.append(Named(option, str(path), kind))
    implied = getattr(args, "implied_paths", None)
    if implied is not None:
        found += implied(args)
    return found


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _same(a: Path, b: Path) -> bool:
    """One file or directory, by resolved path or (existing ones) by device and inode: hard links too."""
    if a.resolve() == b.resolve():
        return True
    ia = _identity(a)
    return ia is not None and ia == _identity(b)


def _inside(path: Path, directory: Path) -> bool:
    """``path`` lies under ``directory`` (resolved: symbolic links followed)."""
    resolved, top = path.resolve(), directory.resolve()
    return top in resolved.parents


def check(paths: Iterable[Named]) -> None:
    """Refuse (LcflowError) the first path that would destroy another, before any work."""
    local = [n for n in paths if not is_remote(n.path)]
    outputs = [n for n in local if n.role.output]
    inputs = [n for n in local if not n.role.output]
    for out in outputs:
        p = Path(out.path)
        if out.role.directory and p.exists() and not p.is_dir():
            raise LcflowError(
                f"{out.option} {out.path} is a file, not a directory: name a directory to write into"
            )
        if not out.role.directory and p.is_dir():
            raise LcflowError(
                f"{out.option} {out.path} is a directory, not a file: name the file to write"
            )
    for i, out in enumerate(outputs):
        for other in outputs[:i]:
            if _same(Path(out.path), Path(other.path)):
                raise LcflowError(
                    f"{other.option} and {out.option} name the same file {out.path}: name different "
                    "files"
                )
        for inp in inputs:
            _check_pair(out, inp)


def _check_pair(out: Named, inp: Named) -> None:
    o, i = Path(out.path), Path(inp.path)
    if _same(o, i):
        raise LcflowError(
            f"{out.option} {out.path} is the input {inp.option} {inp.path}: writing it would destroy "
            f"the input; name another {'directory' if out.role.directory else 'file'}"
        )
    if inp.role.directory:
        if inp.role.reads is None and _inside(o, i):
            raise LcflowError(
                f"{out.option} {out.path} lies inside the input directory {inp.option} {inp.path}: "
                "write it elsewhere"
            )
        for member in inp.role.reads or ():
            if _same(o, i / member) or _inside(o, i / member):
                raise LcflowError(
                    f"{out.option} {out.path} is {member} of the input {inp.option} {inp.path}: "
                    "writing it would destroy the input; name another file"
                )
    if out.role.directory and _inside(i, o):
        raise LcflowError(
            f"the input {inp.option} {inp.path} lies inside the output directory {out.option} "
            f"{out.path}: keep inputs apart from what the command writes"
        )


def launched_rank() -> int | None:
    """This process's rank where a parallel launcher started it, else None."""
    for variable in (
        "HOROVOD_RANK",
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "RANK",
        "SLURM_PROCID",
    ):
        value = os.environ.get(variable)
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


def world_size() -> int:
    """The processes a parallel launcher started with this one (1 where none did)."""
    for variable in ("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"):
        value = os.environ.get(variable, "").strip()
        if value.isdigit():
            return int(value)
    # a task of an srun step, with PMIx or without (torch.distributed's ranks): the step's own tasks
    if "SLURM_PROCID" in os.environ:
        value = os.environ.get("SLURM_STEP_NUM_TASKS", "").strip()
        if value.isdigit():
            return int(value)
    return 1


def this_rank() -> int:
    """This process's rank where a parallel launcher started it (0 otherwise): the ranks of one job all
    name the same outputs, and rank 0 writes them."""
    rank = launched_rank()
    return 0 if rank is None else rank
