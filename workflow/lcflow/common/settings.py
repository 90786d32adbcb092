"""A stage's settings: a frozen dataclass whose fields are its config section's keys, defaulted by the
workflow's schema and checked against it once, when it is made. The rules, the command line and the Python
API all make one and hand it to the stage, so that a key keeps one name from the YAML to the code that uses
it, and a new key of a stage is its schema entry, its field and the lines that use it."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self

from lcflow.common import cli_args, schema_errors
from lcflow.defaults import node
from lcflow.errors import LcflowError


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConfigSection:
    """Base of a stage's settings: a subclass names its section (``SECTION = "cube"``) and declares each of
    the keys it uses as a field, with the schema's default (``dilation_px: int = default("cube.dilation_px")``).
    Lists are held as tuples: settings cannot change once checked."""

    SECTION: ClassVar[str]

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, list):
                object.__setattr__(self, field.name, tuple(value))
        errors = sorted(_validator(self.SECTION).iter_errors(self.as_config()), key=lambda e: list(map(str, e.path)))
        if errors:
            raise LcflowError(schema_errors.message(errors[0], [self.SECTION]))

    def as_config(self) -> dict[str, Any]:
        """The settings as the config section writes them (lists, not tuples)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def to_json(self) -> str:
        """The settings as one JSON object: what a rule hands its command (``--settings``)."""
        return json.dumps(self.as_config(), separators=(",", ":"))

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None) -> Self:
        """The settings of a config section (missing keys: the schema's defaults); a key of the section that
        the stage does not take is refused, naming it."""
        section = dict(section or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(section) - known)
        if unknown:
            raise LcflowError(f"unknown key {unknown[0]!r} in {cls.SECTION} (its keys: {', '.join(sorted(known))})")
        return cls(**section)

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        """``--settings JSON`` (a whole section, as the rules pass it) and an option for each key
        (``dilation_px``: ``--dilation-px``), typed, bounded and described by the schema; an option given
        overrides ``--settings``."""
        group = parser.add_argument_group(f"{cls.SECTION} settings (config section {cls.SECTION!r}; each "
                                          "default is the config's)")
        group.add_argument("--settings", type=cli_args.json_object, default=None, metavar="JSON",
                           help=f"the whole {cls.SECTION} section of a config as a JSON object; the options below "
                                "override its keys")
        for field in dataclasses.fields(cls):
            key = f"{cls.SECTION}.{field.name}"
            spec = node(key)
            value = spec.get("default")
            shown = (",".join(map(str, value)) or "empty") if isinstance(value, list) else value
            group.add_argument(_option(field.name), dest=_dest(field.name), default=None,
                               metavar=None if "enum" in spec else field.name.upper(),
                               type=_parser(key, spec), choices=spec.get("enum"),
                               help=f"{_summary(spec.get('description', ''))} (default: {shown})")

    @classmethod
    def from_options(cls, args: argparse.Namespace) -> Self:
        """The settings a command line gives (:meth:`add_options`)."""
        section = dict(args.settings or {})
        for field in dataclasses.fields(cls):
            given = getattr(args, _dest(field.name))
            if given is not None:
                section[field.name] = given
        return cls.from_config(section)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _dest(name: str) -> str:
    return f"setting_{name}"


def _summary(description: str) -> str:
    """A schema description's first clause (up to its first '.', ';' or ':' outside brackets): an option's
    help (docs/reference/config.md has the whole)."""
    depth = 0
    for i, char in enumerate(description):
        depth += (char in "([") - (char in ")]")
        if depth == 0 and char in ".;:" and description[i + 1:i + 2] in (" ", ""):
            return description[:i]
    return description


def _parser(key: str, spec: dict[str, Any]) -> Callable[[str], Any]:
    """The argparse type of a key's option: numbers bounded as the schema bounds them, lists comma-separated,
    text as it is."""
    kinds = spec["type"] if isinstance(spec.get("type"), list) else [spec.get("type")]
    if "integer" in kinds or "number" in kinds:
        return cli_args.config_value(key)
    if "array" in kinds:
        item = spec.get("items", {})
        return functools.partial(_items, key, int if item.get("type") == "integer" else str)
    return str


def _items(key: str, kind: type, text: str) -> list[Any]:
    """A comma-separated list (empty text: an empty list); its items' bounds and choices are the schema's,
    checked with the rest of the section."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        return [kind(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers ({key})") from None


@functools.cache
def _validator(section: str):
    import jsonschema  # here: every lcflow command imports this module, and a check is needed once a command

    return jsonschema.Draft202012Validator(node(section))
