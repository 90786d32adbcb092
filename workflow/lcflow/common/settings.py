"""A stage's settings: a frozen dataclass whose fields are its config section's keys, defaulted by the
workflow's schema and checked against it once, when it is made. The rules, the command line and the Python
API all make one and hand it to the stage, so that a key keeps one name from the YAML to the code that uses
it, and a new key of a stage is its schema entry, its field and the lines that use it."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self

from lcflow.common import cli_args, schema_errors
from lcflow.defaults import node
from lcflow.errors import LcflowError


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConfigSection:
    """Base of a stage's settings: a subclass names its section (``SECTION = "cube"``) and declares each of
    the keys it uses as a field, with the schema's default (``dilation_px: int = default("cube.dilation_px")``);
    a nested section (``sample.clean``) is a field whose type is another ConfigSection, and may be given as
    a mapping. Lists are held as tuples: settings cannot change once checked. Keys the rules act on
    rather than the stage's command (where its jobs run, what is removed after) are named in
    ``RULE_KEYS``: a command takes them in ``--settings`` only, with no option of their own. Keys whose option
    the command makes itself, in a form of its own (a file to read), are named in ``OWN_OPTIONS``."""

    SECTION: ClassVar[str]
    RULE_KEYS: ClassVar[frozenset[str]] = frozenset()
    OWN_OPTIONS: ClassVar[frozenset[str]] = frozenset()

    def __post_init__(self) -> None:
        nested = _nested(type(self))
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in nested and not isinstance(value, nested[field.name]):
                object.__setattr__(self, field.name, nested[field.name].from_config(value))
            elif isinstance(value, list):
                object.__setattr__(self, field.name, tuple(value))
            elif isinstance(value, Mapping):
                object.__setattr__(self, field.name, dict(value))
        errors = sorted(
            _validator(self.SECTION).iter_errors(self.as_config()),
            key=lambda e: list(map(str, e.path)),
        )
        if errors:  # checked as given: a refusal quotes the value as it was written
            raise LcflowError(schema_errors.message(errors[0], self.SECTION.split(".")))
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if (
                isinstance(value, int)
                and not isinstance(value, bool)
                and _is_number(self.SECTION, field.name)
            ):
                # a number key holds a float, as the CLI parses it
                object.__setattr__(self, field.name, float(value))

    def as_config(self) -> dict[str, Any]:
        """The settings as the config section writes them (lists, not tuples; nested sections as mappings)."""
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
            raise LcflowError(
                f"unknown key {unknown[0]!r} in {cls.SECTION} (its keys: {', '.join(sorted(known))})"
            )
        return cls(**section)

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        """``--settings JSON`` (a whole section, as the rules pass it) and an option for each key
        (``dilation_px``: ``--dilation-px``; ``clean.folds``: ``--clean-folds``), typed, bounded and described
        by the schema; an option given overrides ``--settings``."""
        group = parser.add_argument_group(
            f"{cls.SECTION} settings (config section {cls.SECTION!r}; each default is the config's)"
        )
        group.add_argument(
            "--settings",
            type=cli_args.json_object,
            default=None,
            metavar="JSON",
            help=f"the whole {cls.SECTION} section of a config as a JSON object; the options below "
            "override its keys",
        )
        for path, key, spec in cls._option_leaves():
            value = spec.get("default")
            shown = (
                (",".join(map(str, value)) or "empty")
                if isinstance(value, list)
                else json.dumps(value)
                if isinstance(value, dict)
                else "none"
                if value is None
                else ("yes" if value else "no")
                if isinstance(value, bool)
                else value
            )
            help_text = (
                f"{_summary(spec.get('description', ''), 'enum' in spec)} (default: {shown})"
            )
            if spec.get("type") == "boolean":
                group.add_argument(
                    _option(path),
                    dest=_dest(path),
                    default=argparse.SUPPRESS,
                    help=help_text,
                    action=argparse.BooleanOptionalAction,
                )
                continue
            group.add_argument(
                _option(path),
                dest=_dest(path),
                default=argparse.SUPPRESS,
                metavar=None if "enum" in spec else "_".join(path).upper(),
                type=_parser(key, spec),
                choices=spec.get("enum"),
                help=help_text,
            )

    @classmethod
    def from_options(cls, args: argparse.Namespace) -> Self:
        """The settings a command line gives (:meth:`add_options`)."""
        # a copy, nested mappings too
        section = json.loads(json.dumps(getattr(args, "settings", None) or {}))
        for path, _, _ in cls._option_leaves():
            # given (an option not given leaves no attribute: None is a value)
            if hasattr(args, _dest(path)):
                given = getattr(args, _dest(path))
                place = section
                for part in path[:-1]:
                    place = place.setdefault(part, {})
                place[path[-1]] = given
        return cls.from_config(section)

    @classmethod
    def _option_leaves(cls) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
        """The keys that have a generated option: all but ``RULE_KEYS`` and ``OWN_OPTIONS``."""
        return [leaf for leaf in cls._leaves() if leaf[0][0] not in cls.RULE_KEYS | cls.OWN_OPTIONS]

    @classmethod
    def _leaves(
        cls, path: tuple[str, ...] = ()
    ) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
        """(key path below the section, dotted config key, its schema) of every key, nested ones included."""
        nested, found = _nested(cls), []
        for field in dataclasses.fields(cls):
            if field.name in nested:
                found += nested[field.name]._leaves((*path, field.name))
            else:
                key = ".".join([cls.SECTION, field.name])
                found.append(((*path, field.name), key, node(key)))
        return found


def _is_number(section: str, name: str) -> bool:
    """The schema types the key as a number, not an integer (``3`` in a YAML file is then ``3.0``)."""
    # a key the schema lacks is refused after this
    spec = node(section).get("properties", {}).get(name, {})
    kinds = spec.get("type")
    return "number" in (kinds if isinstance(kinds, list) else [kinds])


_NESTED: dict[type, dict[str, type[ConfigSection]]] = {}


def _nested(cls: type) -> dict[str, type[ConfigSection]]:
    """The fields of ``cls`` that are sections of their own, by name (found once a class)."""
    if cls not in _NESTED:
        hints = typing.get_type_hints(cls)
        _NESTED[cls] = {
            f.name: hint
            for f in dataclasses.fields(cls)
            if isinstance(hint := hints[f.name], type) and issubclass(hint, ConfigSection)
        }
    return _NESTED[cls]


def _plain(value: Any) -> Any:
    if isinstance(value, ConfigSection):
        return value.as_config()
    if isinstance(value, tuple):
        return list(value)
    return dict(value) if isinstance(value, Mapping) else value


def _option(path: tuple[str, ...]) -> str:
    return "--" + "-".join(path).replace("_", "-")


def _dest(path: tuple[str, ...]) -> str:
    return "setting_" + "__".join(path)


def _summary(description: str, choices: bool = False) -> str:
    """A schema description's first sentence (up to its first '.' or ';' outside brackets; for a key of
    ``choices``, whose description gives each its clause, up to its first '.'): an option's help
    (docs/reference/config.md has the whole)."""
    depth, ends = 0, "." if choices else ".;"
    for i, char in enumerate(description):
        depth += (char in "([") - (char in ")]")
        if depth == 0 and char in ends and description[i + 1 : i + 2] in (" ", ""):
            return description[:i]
    return description


def _parser(key: str, spec: dict[str, Any]) -> Callable[[str], Any]:
    """The argparse type of a key's option: numbers bounded as the schema bounds them, lists comma-separated,
    text as it is."""
    kinds = spec["type"] if isinstance(spec.get("type"), list) else [spec.get("type")]
    if "integer" in kinds or "number" in kinds:
        parse = cli_args.config_value(key)
        return _or_none(parse) if "null" in kinds else parse
    if "object" in kinds:
        return cli_args.json_object
    if "array" in kinds:
        item = spec.get("items", {})
        return functools.partial(_items, key, int if item.get("type") == "integer" else str)
    return str


def _or_none(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse``, with ``none`` for the config's null."""

    def parse_or_none(text: str) -> Any:
        return None if text.strip().lower() in ("none", "null") else parse(text)

    parse_or_none.config_key = parse.config_key  # type: ignore[attr-defined]
    parse_or_none.__name__ = parse.__name__
    return parse_or_none


def _items(key: str, kind: type, text: str) -> list[Any]:
    """A comma-separated list (empty text: an empty list); its items' bounds and choices are the schema's,
    checked with the rest of the section."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        return [kind(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of integers ({key})"
        ) from None


@functools.cache
def _validator(section: str):
    from lcflow.common.strict_schema import validator

    return validator(node(section))
