"""A workflow configuration as Snakemake sees it: config files merged in order, which file set each value
(so that an error can name it), and ``key: null`` in a layered file unsetting what a file below set."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lcflow.common.yaml_files import load_file

DEFAULT_CONFIG = "config/config.yaml"


class Origins:
    """Which source set each config value: the last config file that has the key, or ``--config``."""

    def __init__(
        self, files: Sequence[str | Path] = (), overrides: Mapping[str, Any] | None = None
    ):
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


def unset_nulls(
    config: dict[str, Any], schema: Mapping[str, Any] | None = None
) -> list[tuple[str, ...]]:
    """Remove, in place, every key set to null where the schema has no null for it: ``demo: null`` or
    ``labels: {corine: null}`` in a config layered over another unsets what the file below set, and the
    schema's default (or the key's absence) applies. A key the schema does not know is kept, for the
    schema's check to name. Returns the key paths removed."""
    if schema is None:
        from lcflow.defaults import schema as package_schema

        schema = package_schema()
    removed: list[tuple[str, ...]] = []

    def walk(node: dict, where: Mapping[str, Any], path: tuple[str, ...]) -> None:
        for key in list(node):
            sub = _child(where, key)
            if sub is None:
                continue
            if node[key] is None and not _accepts_null(sub):
                del node[key]
                removed.append(path + (key,))
            elif isinstance(node[key], dict):
                walk(node[key], sub, path + (key,))

    walk(config, schema, ())
    return removed


def _child(schema: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    """The schema of ``key`` inside an object's schema (its properties, else its additionalProperties)."""
    found = (schema.get("properties") or {}).get(key)
    if found is None and isinstance(schema.get("additionalProperties"), Mapping):
        found = schema["additionalProperties"]
    return found


def _accepts_null(schema: Mapping[str, Any]) -> bool:
    kinds = schema.get("type")
    if kinds == "null" or (isinstance(kinds, list) and "null" in kinds):
        return True
    return any(_accepts_null(alt) for alt in schema.get("oneOf", []) + schema.get("anyOf", []))
