"""``lcflow report``: Snakemake's report of a run, published whole or not at all.

``snakemake --report FILE`` writes FILE in place: a full disk or a kill leaves a truncated report under its
final name, over the last good one. This command has Snakemake write it under a staging name beside FILE,
checks it is whole (an HTML file that ends its document, a zip archive whose members read back), and only
then renames it into place; a failure keeps the earlier report as it was.
"""

import logging
import subprocess
import sys
import zipfile
from pathlib import Path

from lcflow.common import path_guard
from lcflow.common.atomic import atomic_path
from lcflow.errors import LcflowError

log = logging.getLogger("lcflow")


def why_incomplete(path: Path) -> str | None:
    """Why the report ``path`` is not whole, None where it is."""
    if path.stat().st_size == 0:
        return "it is empty"
    if path.suffix == ".zip":
        try:
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
        except zipfile.BadZipFile as exc:
            return f"it is no whole zip archive ({exc})"
        return f"its member {bad} does not read back" if bad else None
    with path.open("rb") as fh:
        fh.seek(max(0, path.stat().st_size - 64))
        tail = fh.read().rstrip()
    return None if tail.lower().endswith(b"</html>") else "it ends before its document does"


def run(out: str | Path, snakemake_args: list[str], program: str | None = None) -> None:
    """Write Snakemake's report of the run ``snakemake_args`` describe to ``out`` (.html or .zip), whole.

    Args:
        out: the report to publish.
        snakemake_args: the run's Snakemake options (profile, config files, directory), as for the run.
        program: the snakemake to run; None: the one beside this Python.
    """
    out = Path(out)
    if out.suffix not in (".html", ".zip"):
        raise LcflowError(f"--out {out}: a report is a .html or a .zip file")
    program = program or str(Path(sys.executable).with_name("snakemake"))
    with atomic_path(out, suffix=out.suffix) as staged:
        staged.unlink()  # Snakemake makes its own file
        done = subprocess.run([program, *snakemake_args, "--report", str(staged)], check=False)
        if done.returncode:
            raise LcflowError(
                f"snakemake --report ended with exit {done.returncode} (its lines above); {out} is left as "
                "it was"
            )
        if not staged.exists():
            raise LcflowError(f"snakemake --report wrote no report; {out} is left as it was")
        why = why_incomplete(staged)
        if why:
            raise LcflowError(
                f"the report Snakemake wrote is not whole: {why}; {out} is left as it was"
            )
    log.info("report -> %s", out)


def cmd_report(a) -> None:
    run(a.out, [arg for arg in a.snakemake if arg != "--"])


def register(command) -> None:
    """``lcflow report``; ``command(name, help, **kw)`` makes its sub-parser."""
    p = command(
        "report",
        "Snakemake's report of a run (snakemake --report), published only once it is whole",
    )
    p.add_argument(
        "--out", required=True, type=path_guard.output_file, help="the report: .html or .zip"
    )
    p.add_argument(
        "snakemake",
        nargs="*",
        help="after --: the run's Snakemake options, as for the run (--profile, --configfile, ...)",
    )
    p.set_defaults(func=cmd_report)
