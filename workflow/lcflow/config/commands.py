"""``lcflow check-config``: a configuration checked as the workflow checks it, from any directory."""

from __future__ import annotations

from pathlib import Path

from lcflow.common import path_guard
from lcflow.config.loading import DEFAULT_CONFIG, Origins, merge, unset_nulls
from lcflow.config.validation import check
from lcflow.defaults import SCHEMA, default
from lcflow.errors import LcflowError
from lcflow.train.parallel import backend_check


def cmd_check_config(a) -> None:
    """The demo's config of this checkout unless files are named; one line that says it is sound."""
    root = Path(__file__).resolve().parents[3]
    if not a.configfile and not (root / DEFAULT_CONFIG).exists():
        raise LcflowError(
            "name the config to check: --configfile CONFIG.yaml [OVERRIDE.yaml ...] (the demo's is "
            f"{DEFAULT_CONFIG} of lcflow's repository)"
        )
    files = a.configfile or [root / DEFAULT_CONFIG]
    merged = merge(files)
    unset_nulls(merged)
    check(merged, SCHEMA, base=a.directory, origins=Origins(files))
    # here, not at the top: every lcflow command imports this module
    from lcflow.train.models import DEEP

    backend = (merged.get("distributed") or {}).get("backend", default("distributed.backend"))
    models = merged.get("models") or []
    if set(models) & set(DEEP) and (problem := backend_check.problem(backend)):
        raise LcflowError(problem)  # the deep models' ranks load it wherever the jobs run
    what = f"models {', '.join(models)}" if models else "the cubes only (no labels, no models)"
    print(f"config OK: {len(merged['tiles'])} tile(s) x {len(merged['years'])} year(s), {what}")


def register(command) -> None:
    """``lcflow check-config``; ``command(name, help, **kw)`` makes its sub-parser."""
    p = command(
        "check-config", "check a workflow configuration as the workflow does before any job"
    )
    p.add_argument(
        "--configfile",
        nargs="+",
        type=path_guard.input_file,
        help="config file(s), merged in order (default: config/config.yaml of this checkout)",
    )
    p.add_argument(
        "--directory", default=".", help="directory the config's relative paths start from"
    )
    p.set_defaults(func=cmd_check_config)
