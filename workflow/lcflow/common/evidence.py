"""When a set of points or rows is too small to back an accuracy figure: the rule, its source, and the
record that takes the figure's place.

The rule: at least :data:`MIN_POINTS` points (labelled reference points on the map, or test rows) of at
least :data:`MIN_CLASSES` reference classes. Fifty is the least sample per map class that Congalton and
Green (Assessing the Accuracy of Remotely Sensed Data, 3rd ed., 2019) advise, taken here as the least
for a whole map: below it the 95 % (Wilson) interval of an overall accuracy near 0.5 is wider than
+-0.13.
With one reference class, kappa and every class accuracy but one are undefined, and an overall accuracy
says only how often the map names that class. Below the rule an assessment carries
``{"not_enough_evidence": why, ...}`` in place of its figures, and every table, figure and comparison
shows "not enough evidence" instead of a number.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import numpy as np

log = logging.getLogger("lcflow")

MIN_POINTS = 50
MIN_CLASSES = 2
RULE = (
    f"at least {MIN_POINTS} points of at least {MIN_CLASSES} classes (Congalton & Green 2019: 50 samples "
    "the least per map class; with one class kappa and class accuracies are undefined)"
)
#: the key that marks a withheld figure
KEY = "not_enough_evidence"


def shortfall(reference_codes: Iterable[int], what: str = "points") -> str | None:
    """Why these reference codes (one per point or row) cannot back an accuracy figure; None where they can."""
    codes = np.asarray(
        list(reference_codes) if not isinstance(reference_codes, np.ndarray) else reference_codes
    )
    n, classes = int(codes.size), int(np.unique(codes).size)
    if n >= MIN_POINTS and classes >= MIN_CLASSES:
        return None
    return f"{n} {what}, of {classes} class{'es' if classes != 1 else ''}; an accuracy needs {RULE}"


def withheld(reason: str, source: str, **counts: Any) -> dict[str, Any]:
    """The record that stands for a figure not backed by evidence enough; the warning names ``source``."""
    log.warning("%s: not enough evidence for an accuracy figure: %s", source, reason)
    return {KEY: reason, **counts}


def lacking(result: dict[str, Any] | None) -> str | None:
    """The reason an assessment part withheld its figures (None where it has them or is absent)."""
    return (result or {}).get(KEY)
