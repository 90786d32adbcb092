"""What a dry run under the Slurm profile says beside Snakemake's listing: Snakemake lists every job as
``rule`` with the profile's resources, local or not, since a dry run does not decide where jobs run; the
rules that run where Snakemake runs (the login node) are named once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def asked(argv: Sequence[str]) -> bool:
    """Whether the Snakemake command line ``argv`` (its arguments) asks for a dry run (``-n``, ``-np``,
    ``--dry-run``), read by Snakemake's own parser."""
    if not any(
        a in ("--dry-run", "--dryrun") or (a[:1] == "-" and a[1:2] != "-" and "n" in a)
        for a in argv
    ):
        return False
    try:
        from snakemake.cli import get_argument_parser

        known, _ = get_argument_parser().parse_known_args(list(argv))
    except (ImportError, SystemExit):
        return False
    return bool(getattr(known, "dryrun", False))


def local_rules_said(rules: Iterable[Any], local: Iterable[str]) -> str:
    """The line a Slurm dry run prints: which of ``rules`` (``local``: the workflow's local rules' names)
    run where Snakemake runs, not as Slurm jobs."""
    names = sorted({getattr(r, "name", r) for r in rules} & set(local))
    return (
        "lcflow: under Slurm these rules run here, where Snakemake runs, not as Slurm jobs (the dry run "
        f"lists their jobs with the profile's resources all the same): {', '.join(names)}"
    )
