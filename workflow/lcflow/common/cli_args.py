"""Argument types of the ``lcflow`` commands: each refuses a bad value in one line naming it."""

import argparse
import json
import math


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
            raise argparse.ArgumentTypeError(f"{text} must be a number {'>=' if inclusive else '>'} {low:g}")
        return value
    return parse


positive_float = float_above(0)
non_negative = float_above(0, inclusive=True)


def share(text: str) -> float:
    value = number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} must be within 0..1")
    return value


def json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a JSON object")
    return value
