"""The lock an earlier Snakemake left in a study's folder: a controller killed with SIGKILL (or a login node
rebooted) leaves ``.snakemake/locks`` behind, and the next run then ends in Snakemake's LockException.
A dry run says so first, with what makes ``--unlock`` safe."""

from __future__ import annotations

from pathlib import Path

LOCKS = Path(".snakemake") / "locks"


def stale_lock(workdir: Path = Path(".")) -> str | None:
    """One line where ``workdir`` holds a Snakemake lock (None where it holds none)."""
    locks = sorted((workdir / LOCKS).glob("*.lock")) if (workdir / LOCKS).is_dir() else []
    if not locks:
        return None
    return (
        f"lcflow: warning: {workdir / LOCKS} holds a lock of an earlier Snakemake run ({len(locks)} file(s)): "
        "a controller that was stopped (SIGKILL, a login node rebooted) or one still running. Where none runs "
        "for this folder (squeue --me -n lcflow-controller; pgrep -u $USER -f snakemake on the login node), "
        "run the same command with --unlock, then again without (docs/slurm.md, 'After the controller died')"
    )
