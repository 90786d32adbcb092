"""Argument types of the ``lcflow`` commands: each refuses a bad value in one line naming it."""

import argparse
import json
import math
import re

from lcflow.common.schema_errors import interval


def int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} must be at least {low}")
        return value

    return parse


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def float_above(low: float, inclusive: bool = False):
    def parse(text: str) -> float:
        value = number(text)
        if not math.isfinite(value) or value < low or (value == low and not inclusive):
            raise argparse.ArgumentTypeError(
                f"{text} must be a number {'>=' if inclusive else '>'} {low:g}"
            )
        return value

    return parse


positive_float = float_above(0)
non_negative = float_above(0, inclusive=True)


def share(text: str) -> float:
    value = number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} must be within 0..1")
    return value


def json_list(text: str) -> list:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not JSON ({exc})") from None
    if not isinstance(value, list):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a JSON list")
    return value


def json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a JSON object")
    return value


def worker_id(text: str) -> str:
    """A study worker's id: letters, digits, '.', '_' and '-', beginning with a letter or digit (the workflow
    numbers its workers 0 .. hpo.workers - 1)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a worker id is up to 64 letters, digits, '.', '_' or '-', "
            "beginning with a letter or digit"
        )
    return text


def number_in(low: float, high: float, integer: bool = False, low_open: bool = False):
    """The argparse type of a number in ``[low, high]`` (``(low, high]`` with ``low_open``): finite, and a
    whole number where ``integer``; anything else refused in one line with the interval."""
    shown = f"{'(' if low_open else '['}{low:g}, {high:g}]"

    def parse(text: str):
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'a whole number' if integer else 'a number'}"
            ) from None
        if not (
            math.isfinite(value) and (low < value if low_open else low <= value) and value <= high
        ):
            raise argparse.ArgumentTypeError(f"{text} is outside {shown}")
        return value

    parse.__name__ = f"number in {shown}"
    return parse


def config_value(key: str, null_as: str | None = None):
    """The argparse type of an option that sets the config key ``key``: the schema's type and bounds, so a
    command refuses what the config refuses (``null_as``: the text that stands for the config's null)."""
    from lcflow.defaults import node

    spec = node(key)
    kinds = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    integer = "integer" in kinds

    def parse(text: str):
        if null_as is not None and text == null_as:
            return int(text) if integer else float(text)
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'an integer' if integer else 'a number'} ({key})"
            ) from None
        inside = (
            math.isfinite(value)
            and value >= spec.get("minimum", -math.inf)
            and value <= spec.get("maximum", math.inf)
            and value > spec.get("exclusiveMinimum", -math.inf)
            and value < spec.get("exclusiveMaximum", math.inf)
        )
        if not inside:
            raise argparse.ArgumentTypeError(
                f"{text} is outside {interval(spec)} ({key}"
                + (f"; {null_as}: none" if null_as is not None else "")
                + ")"
            )
        return value

    parse.config_key = key  # type: ignore[attr-defined]
    parse.__name__ = key
    return parse


def from_config(key: str, null_as: str | None = None) -> dict:
    """``type`` and ``default`` of an option that sets the config key ``key`` (see :func:`config_value`)."""
    from lcflow.defaults import default

    value = default(key)
    parse = config_value(key, null_as)
    if value is None and null_as is not None:
        value = parse(null_as)
    elif (
        isinstance(value, int)
        and not isinstance(value, bool)
        and "integer" not in str(node_type(key))
    ):
        value = float(value)  # a number option's default is a float, as the values it parses
    return {"type": parse, "default": value}


def node_type(key: str):
    from lcflow.defaults import node

    return node(key)["type"]
