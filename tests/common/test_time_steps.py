"""The steps' dates: read from a samples table's metadata (refused when they cannot be a time axis of its
steps) and counted in days for the models that encode when a step was observed."""

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from lcflow.common import time_steps
from lcflow.errors import LcflowError
from lcflow.labels import samples_table
from lcflow.retrieve.time_grid import year_grid


@pytest.mark.parametrize("value, message", [
    (["2018-01-16", "2018-05-17"], r"'time_steps' holds 2 entries; a list of 3 ISO dates \(one per time step\) expected"),
    ("2018-01-16", r"'time_steps' holds str; a list of 3 ISO dates"),
    (["2018-01-16", "16.05.2018", "2018-09-16"], r"'time_steps'\[1\] = '16.05.2018' is not an ISO date"),
    (["2018-01-16", "2018-09-16", "2018-05-17"], r"'time_steps' goes back in time at step 2 \(2018-09-16 then 2018-05-17\)"),
])
def test_dates_that_cannot_be_the_steps_of_a_table_are_refused_naming_it(value, message):
    frame = pd.DataFrame({"label": [1, 2] * 3, **{f"B04_t{k:02d}": np.arange(6.0) for k in range(3)}})
    with pytest.raises(LcflowError, match=rf"^field\.parquet: metadata {message}"):
        samples_table.check(frame, "field.parquet", {"time_steps": value})
    assert samples_table.check(frame, "field.parquet", {"time_steps": ["2018-01-16", "2018-05-17", "2018-09-16"]})


def test_a_cubes_steps_fall_on_the_middle_of_equal_parts_of_its_year():
    """The cube's own dates (its time grid's centres, whole days) and the no-dates fallback agree within a
    day, a day and a half in a leap year, so models of dated and undated tables of one cube see the same days."""
    for year, steps in ((2018, 12), (2020, 12), (2019, 73)):
        dates = year_grid(year, steps).centres
        assert np.abs(time_steps.days(steps, dates) - time_steps.days(steps)).max() <= (1.5 if year == 2020 else 1.0)


def test_days_count_on_across_years_from_the_first_years_first_of_january():
    dates = [dt.date(2015, 7, 11), dt.date(2015, 12, 31), dt.date(2016, 1, 1), dt.date(2017, 12, 22)]
    assert time_steps.days(4, dates).tolist() == [191.5, 364.5, 365.5, 365 + 366 + 355 + 0.5]
    assert time_steps.days(3).tolist() == [365 / 6, 365 / 2, 5 * 365 / 6]
