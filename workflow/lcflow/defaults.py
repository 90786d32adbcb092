"""The configuration's defaults, written once in the workflow's schema and read from there by the commands
and the code, so a default cannot differ between ``lcflow <stage>``, a function call and a workflow run."""

import functools
from pathlib import Path
from typing import Any

import yaml

#: libyaml's parser where PyYAML was built with it (about ten times faster), else PyYAML's own: for the
#: file lcflow itself ships and every command reads, the schema
SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: the JSON schema of the workflow configuration: package data (workflow/schemas/ links it, as the Snakemake
#: workflow catalog lays a workflow out)
SCHEMA = Path(__file__).resolve().parent / "schemas" / "config.schema.yaml"


@functools.cache
def schema() -> dict[str, Any]:
    return yaml.load(SCHEMA.read_text(), Loader=SafeLoader)


def node(key: str) -> dict[str, Any]:
    """The schema of a dotted config key, e.g. ``cube.cache_mb``: its type, bounds and default."""
    found = schema()
    for part in key.split("."):
        found = found["properties"][part]
    return found


def default(key: str) -> Any:
    """The schema's default of a dotted config key, e.g. ``cube.cache_mb``; KeyError where it has none."""
    node_ = node(key)
    if "default" not in node_:
        raise KeyError(f"{key} has no default in {SCHEMA}")
    value = node_["default"]
    return list(value) if isinstance(value, list) else value
