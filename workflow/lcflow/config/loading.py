"""A workflow configuration as Snakemake sees it: config files merged in order, and which file set each
value (so that an error can name it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lcflow.common.yaml_files import load_file

DEFAULT_CONFIG = "config/config.yaml"


class Origins:
    """Which source set each config value: the last config file that has the key, or ``--config``."""

    def __init__(self, files: Sequence[str | Path] = (), overrides: Mapping[str, Any] | None = None):
        self.files = [Path(f) for f in files]
        self.loaded = [load_file(f) for f in self.files]
        self.overrides = dict(overrides or {})

    def of(self, path: Sequence[str | int]) -> str | None:
        if _has(self.overrides, path):
            return "--config"
        for f, data in zip(reversed(self.files), reversed(self.loaded)):
            if _has(data, path):
                return str(f)
        return None


def _has(data: Any, path: Sequence[str | int]) -> bool:
    """True when ``data`` holds the leading mapping keys of ``path`` (list indices end the walk)."""
    keys = [p for p in path if not isinstance(p, int)] if path else []
    if not keys:
        return False
    node = data
    for k in path:
        if isinstance(k, int):
            return True
        if not isinstance(node, Mapping) or k not in node:
            return False
        node = node[k]
    return True


def merge(files: Sequence[str | Path]) -> dict[str, Any]:
    """Config files merged in order, later keys over earlier ones (as Snakemake merges them)."""
    out: dict[str, Any] = {}
    for f in files:
        _update(out, load_file(f))
    return out


def _update(base: dict, new: Mapping) -> None:
    for k, v in new.items():
        if isinstance(v, Mapping) and isinstance(base.get(k), dict):
            _update(base[k], v)
        else:
            base[k] = v
