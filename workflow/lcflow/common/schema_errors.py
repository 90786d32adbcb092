"""A config value the schema refuses, said as users write config: its key path, its value, and the bound
or choice it misses (``cube.dilation_px = 60 is outside [0, 50]``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jsonschema


def key_path(path: Sequence[str | int]) -> str:
    """A key path as users write it: ``labels.mapping``, ``years[2]``."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def plain_number(value: float) -> str:
    """A bound as people write it: 1, not 1.0."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def interval(node: dict[str, Any]) -> str:
    """A number's accepted range from its schema, in interval notation: ``[1, 1000]``, ``(0, 3600]``."""
    low = (
        f"({plain_number(node['exclusiveMinimum'])}"
        if "exclusiveMinimum" in node
        else f"[{plain_number(node['minimum'])}"
        if "minimum" in node
        else "(-inf"
    )
    high = (
        f"{plain_number(node['exclusiveMaximum'])})"
        if "exclusiveMaximum" in node
        else f"{plain_number(node['maximum'])}]"
        if "maximum" in node
        else "inf)"
    )
    return f"{low}, {high}"


def unknown_key(extra: Iterable[str], where: str) -> str:
    """The line for keys a schema does not know: the first of them by name, and where."""
    return f"unknown key {sorted(extra)[0]!r} in {where}"


def message(error: jsonschema.ValidationError, prefix: Sequence[str | int] = ()) -> str:
    """One line for a schema error; ``prefix``: the key path of the part of the config that was checked."""
    where, value = key_path([*prefix, *error.absolute_path]), error.instance
    if error.validator == "additionalProperties":
        extra = set(value) - set(error.schema.get("properties", {}))
        return unknown_key(extra, where) if extra else error.message
    if "propertyNames" in error.absolute_schema_path:
        return f"{where}: key {value!r} is not a valid MGRS tile id"
    if error.validator == "pattern":
        kind = "MGRS tile id" if "C-HJ-NP-X" in error.validator_value else "value"
        return f"{where} = {value!r} is not a valid {kind} (pattern {error.validator_value})"
    if error.validator == "enum":
        return f"{where} = {value!r} is not one of {error.validator_value}"
    # an empty list: jsonschema's "should be non-empty"
    if error.validator in ("minItems", "maxItems") and value:
        bound = "at least" if error.validator == "minItems" else "at most"
        return f"{where} = {value!r} has {len(value)} item(s): {bound} {error.validator_value}"
    if error.validator == "required":
        return f"{where}: {error.message}"
    if error.validator == "dependentRequired":
        given = [
            k
            for k, needs in error.validator_value.items()
            if k in value and set(needs) - set(value)
        ]
        missing = sorted(set(error.validator_value[given[0]]) - set(value)) if given else []
        if given:
            return (
                f"{key_path([*prefix, *error.absolute_path, given[0]])} is given without "
                f"{', '.join(missing)}: they go together (neither: the cubes only)"
            )
        return f"{where}: {error.message}"
    if error.validator == "oneOf":
        return f"{where}: give exactly one of its alternatives ({error.message})"
    if error.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return f"{where} = {value!r} is outside {interval(error.schema)}"
    if (
        error.validator == "type"
        and error.validator_value == "integer"
        and isinstance(value, float)
    ):
        return f"{where} = {value!r} is not a whole number (write it without a decimal point)"
    return f"{where} = {value!r}: {error.message}"
