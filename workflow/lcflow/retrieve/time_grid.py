"""The cube's time grid and the step each item falls in.

A year is cut into ``cube.time_steps`` equal windows, or into calendar periods (``cube.period``: months,
dekads, N days or weeks from 1 January, as ISO 8601 durations like sits' ``period`` and openEO's
``aggregate_temporal_period``). A scene is an instant and falls in the step that holds it; a composite
(an item with ``start_datetime`` and ``end_datetime``) falls in the step its interval overlaps most, so a
month's composite dated on the 1st is the month's, whatever the grid.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lcflow.errors import LcflowError

log = logging.getLogger("lcflow.retrieve.cube")

#: the most steps a year's grid may have (a cube stores every band of every step)
MAX_STEPS = 73
_PERIOD = re.compile(r"^P(\d+)([DWM])$")
#: named periods and the ISO 8601 duration they stand for
_NAMED = {"month": "P1M", "dekad": "dekad", "week": "P1W"}


@dataclass(frozen=True)
class TimeGrid:
    """A year's steps: their ``len(centres) + 1`` edges (naive UTC) and centre dates; ``period`` says how
    they were cut (``12 equal windows``, ``P1M``, ``dekad``)."""

    edges: tuple[dt.datetime, ...]
    centres: tuple[dt.date, ...]
    period: str

    @property
    def steps(self) -> int:
        return len(self.centres)


def check_period(period: str | None) -> str | None:
    """``period`` in its canonical form (``P1M``, ``P10D``, ``dekad``), None for equal windows; anything
    else refused, naming ``cube.period`` and the forms it takes."""
    if period is None:
        return None
    text = _NAMED.get(str(period).strip().lower(), str(period).strip().upper())
    if text == "dekad":
        return text
    found = _PERIOD.match(text)
    if not found or int(found.group(1)) == 0:
        raise LcflowError(
            f"cube.period {period!r} is not a period: give an ISO 8601 duration of days, weeks or months "
            "(P10D, P2W, P1M, P3M), 'dekad', 'month' or 'week'"
        )
    n, unit = int(found.group(1)), found.group(2)
    steps = _count(n, unit)
    if steps > MAX_STEPS:
        raise LcflowError(
            f"cube.period {period!r} cuts a year into {steps} steps, more than {MAX_STEPS}: take a longer period"
        )
    return f"P{n}{unit}"


def _count(n: int, unit: str) -> int:
    """Steps of a year cut every ``n`` ``unit`` from 1 January, the last one ending on 31 December (it
    takes the leap day, so every year has as many steps)."""
    if unit == "M":
        return math.ceil(12 / n)
    return math.ceil(365 / (n * (7 if unit == "W" else 1)))


def year_grid(year: int, steps: int, period: str | None = None) -> TimeGrid:
    """The grid of ``year``: ``steps`` equal windows, or the calendar periods of ``period``
    (:func:`check_period`), the last one ending where the year ends."""
    start, end = dt.datetime(year, 1, 1), dt.datetime(year + 1, 1, 1)
    canonical = check_period(period)
    if canonical is None:
        length = end - start
        edges = [start + length * k / steps for k in range(steps + 1)]
        said = f"{steps} equal windows"
    elif canonical == "dekad":
        edges = [dt.datetime(year, m, d) for m in range(1, 13) for d in (1, 11, 21)] + [end]
        said = canonical
    else:
        n, unit = int(canonical[1:-1]), canonical[-1]
        count = _count(n, unit)
        if unit == "M":
            edges = [dt.datetime(year, 1 + n * k, 1) for k in range(count)] + [end]
        else:
            days = n * (7 if unit == "W" else 1)
            edges = [start + dt.timedelta(days=days * k) for k in range(count)] + [end]
        said = canonical
    centres = tuple(
        (edges[k] + (edges[k + 1] - edges[k]) / 2).date() for k in range(len(edges) - 1)
    )
    return TimeGrid(tuple(edges), centres, said)


def item_interval(item) -> tuple[dt.datetime, dt.datetime]:
    """An item's time as naive UTC: (start, end) of a composite (``start_datetime`` and ``end_datetime``,
    the end after the start), else its ``datetime`` twice (an acquisition is an instant)."""
    from lcflow.retrieve.sentinel2 import utc

    properties = item.properties
    start, end = properties.get("start_datetime"), properties.get("end_datetime")
    if start and end:
        first, last = _parsed(start, item.id), _parsed(end, item.id)
        if last > first:
            return first, last
    when = item.datetime
    if when is None:
        if not start:
            raise LcflowError(f"item {item.id} has no datetime and no start_datetime")
        return _parsed(start, item.id), _parsed(start, item.id)
    return utc(when), utc(when)


def item_time(item) -> dt.datetime:
    """The time an item is ordered by (naive UTC): its ``datetime``, else its ``start_datetime``."""
    from lcflow.retrieve.sentinel2 import utc

    return utc(item.datetime) if item.datetime is not None else item_interval(item)[0]


def _parsed(value, item_id: str) -> dt.datetime:
    from lcflow.retrieve.sentinel2 import utc

    try:
        return utc(dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")))
    except ValueError:
        raise LcflowError(f"item {item_id}: {value!r} is not an ISO 8601 time") from None


def steps_of(
    intervals: Sequence[tuple[dt.datetime, dt.datetime]], edges: Sequence[dt.datetime]
) -> np.ndarray:
    """The step of each (start, end): the one holding an instant, the one a composite's interval overlaps
    most (the earlier of two equal); -1 where none does."""
    found = np.full(len(intervals), -1, dtype=np.intp)
    for i, (start, end) in enumerate(intervals):
        if end <= start:
            for k in range(len(edges) - 1):
                if edges[k] <= start < edges[k + 1]:
                    found[i] = k
                    break
            continue
        overlaps = [
            (min(end, edges[k + 1]) - max(start, edges[k])).total_seconds()
            for k in range(len(edges) - 1)
        ]
        best = int(np.argmax(overlaps))
        found[i] = best if overlaps[best] > 0 else -1
    return found


def steps_of_instants(times: np.ndarray, edges: Sequence[dt.datetime]) -> np.ndarray:
    """:func:`steps_of` for instants given as datetime64."""
    edge64 = np.array(edges, dtype="datetime64[us]")
    step = np.searchsorted(edge64, np.asarray(times, dtype="datetime64[us]"), side="right") - 1
    return np.where((step >= 0) & (step < len(edges) - 1), step, -1).astype(np.intp)


def composites_sharing_steps(items, intervals, steps: np.ndarray) -> list[tuple[int, list[str]]]:
    """The steps that hold more than one composite (an item with an interval), with their ids: two months'
    composites in one step are averaged, which a grid of the composites' own period would not do."""
    shared: dict[int, list[str]] = {}
    for item, (start, end), step in zip(items, intervals, steps):
        if end > start and step >= 0:
            shared.setdefault(int(step), []).append(item.id)
    return [(k, ids) for k, ids in sorted(shared.items()) if len(ids) > 1]
