"""When each time step of a series was observed: the samples' dates (``time_steps`` in a samples table's
metadata, a cube's tag), for the models that encode time (ltae's day positions, presto's months).

A cube's steps are equal parts of one calendar year, but a table brought from elsewhere may hold
acquisition dates over several years (the Slovenia series: 68 dates from July 2015 to December 2017);
taking those as equal parts of one year would give its steps days and months they do not have.
"""

import datetime as dt
from collections.abc import Sequence

import numpy as np

from lcflow.errors import LcflowError


def parse(time_steps: object, steps: int, where: str) -> list[dt.date]:
    """``time_steps`` as ``steps`` dates in order; refused, naming ``where``, if it is anything else."""
    if not isinstance(time_steps, list) or len(time_steps) != steps:
        count = (
            f"{len(time_steps)} entries"
            if isinstance(time_steps, list)
            else type(time_steps).__name__
        )
        raise LcflowError(
            f"{where}: metadata 'time_steps' holds {count}; a list of {steps} ISO dates "
            f"(one per time step) expected"
        )
    dates = []
    for k, value in enumerate(time_steps):
        try:
            dates.append(dt.date.fromisoformat(str(value)[:10]))
        except ValueError:
            raise LcflowError(
                f"{where}: metadata 'time_steps'[{k}] = {value!r} is not an ISO date (YYYY-MM-DD)"
            ) from None
    backwards = [k for k in range(1, steps) if dates[k] < dates[k - 1]]
    if backwards:
        k = backwards[0]
        raise LcflowError(
            f"{where}: metadata 'time_steps' goes back in time at step {k} "
            f"({dates[k - 1].isoformat()} then {dates[k].isoformat()})"
        )
    return dates


def days(steps: int, dates: Sequence[dt.date] | None = None) -> np.ndarray:
    """Each step's day, counted from 1 January of its first year (the middle of the day): the dates' where
    given, else the middle of ``steps`` equal parts of a year. Steps of one calendar year get their day of
    the year, whatever the year, so a model trained on one year reads another's cube alike."""
    if dates is None:
        return (np.arange(steps) + 0.5) * 365.0 / steps
    origin = dt.date(dates[0].year, 1, 1)
    return np.array([(d - origin).days + 0.5 for d in dates], dtype=np.float64)
