"""Reading the YAML (or JSON) files users write: configs, search spaces; a file that is not a mapping is
refused in one line naming it."""

from pathlib import Path
from typing import Any

import yaml

from lcflow.errors import LcflowError


def load_file(path: str | Path) -> dict[str, Any]:
    """One YAML (or JSON) config file as a mapping, or one line saying why it is not one."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise LcflowError(f"config file {path}: cannot be read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise LcflowError(f"config file {path}:{where} is not valid YAML ({getattr(exc, 'problem', exc)})") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise LcflowError(f"config file {path}: expected a mapping of keys, found {type(data).__name__}")
    return data
