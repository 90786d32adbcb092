"""The year's time grid (equal windows or calendar periods) and the step each item falls in: an acquisition
in the step that holds it, a composite in the step its interval overlaps most."""

import datetime as dt

import numpy as np
import pystac
import pytest

from lcflow.errors import LcflowError
from lcflow.retrieve import search, time_grid


def _composite(month: int, year: int = 2022, dated: bool = True) -> pystac.Item:
    """An openEO-style monthly composite: dated the 1st (or null), its interval the month."""
    start = dt.datetime(year, month, 1, tzinfo=dt.timezone.utc)
    end = dt.datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=dt.timezone.utc) - dt.timedelta(seconds=1)
    return pystac.Item(f"composite_{year}_{month:02d}", None, None, start if dated else None,
                       {"s2:mgrs_tile": "31UFT"}, start_datetime=start, end_datetime=end)


@pytest.mark.parametrize("period, steps, first_edges", [
    ("P1M", 12, ["2022-01-01", "2022-02-01", "2022-03-01"]),
    ("month", 12, ["2022-01-01", "2022-02-01", "2022-03-01"]),
    ("P3M", 4, ["2022-01-01", "2022-04-01", "2022-07-01"]),
    ("dekad", 36, ["2022-01-01", "2022-01-11", "2022-01-21", "2022-02-01"]),
    ("P10D", 37, ["2022-01-01", "2022-01-11", "2022-01-21", "2022-01-31"]),
    ("P16D", 23, ["2022-01-01", "2022-01-17", "2022-02-02"]),
    ("P2W", 27, ["2022-01-01", "2022-01-15", "2022-01-29"]),
    ("P5D", 73, ["2022-01-01", "2022-01-06"]),
])
def test_calendar_periods_cut_the_year_from_the_first_of_january(period, steps, first_edges):
    for year in (2022, 2024):  # a leap year has as many steps: its last takes the leap day
        grid = time_grid.year_grid(year, 12, period)
        assert grid.steps == steps and grid.edges[-1] == dt.datetime(year + 1, 1, 1)
        assert [e.date().isoformat() for e in grid.edges[:len(first_edges)]] == [
            f"{year}{e[4:]}" for e in first_edges]
        assert all(a < b for a, b in zip(grid.edges, grid.edges[1:]))
        assert all(grid.edges[k].date() <= grid.centres[k] < grid.edges[k + 1].date() for k in range(steps))


@pytest.mark.parametrize("bad", ["P1Y", "P0M", "monthly", "P1D", "10D", "P1.5M"])
def test_a_period_that_is_not_one_is_refused_naming_the_key(bad):
    with pytest.raises(LcflowError, match=rf"^cube.period '{bad}' "):
        time_grid.check_period(bad)


def test_each_monthly_composite_falls_in_its_own_month_on_every_grid():
    """Dated the 1st, each month's composite belongs to the month its interval covers: on a monthly grid,
    and on the 12 equal windows too (whose centres are mid-month, so that the nearest centre of a
    composite dated 1 March is February's)."""
    items = [_composite(m) for m in range(1, 13)]
    intervals = [time_grid.item_interval(i) for i in items]
    for grid in (time_grid.year_grid(2022, 12, "P1M"), time_grid.year_grid(2022, 12)):
        steps = time_grid.steps_of(intervals, grid.edges)
        assert steps.tolist() == list(range(12))
        assert time_grid.composites_sharing_steps(items, intervals, steps) == []
    quarters = time_grid.year_grid(2022, 12, "P3M")
    steps = time_grid.steps_of(intervals, quarters.edges)
    assert steps.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    shared = time_grid.composites_sharing_steps(items, intervals, steps)
    assert [k for k, _ in shared] == [0, 1, 2, 3] and shared[0][1] == [i.id for i in items[:3]]


def test_an_acquisition_falls_in_the_step_that_holds_it():
    grid = time_grid.year_grid(2018, 12)
    times = np.array(["2018-01-01T00:00", "2018-01-30T10:00", "2018-12-31T23:59", "2019-01-01"],
                     dtype="datetime64[us]")
    assert time_grid.steps_of_instants(times, grid.edges).tolist() == [0, 0, 11, -1]
    intervals = [(t.astype(dt.datetime),) * 2 for t in times]
    assert time_grid.steps_of(intervals, grid.edges).tolist() == [0, 0, 11, -1]


def test_items_of_null_datetime_are_searched_by_their_interval():
    """STAC allows `datetime: null` with start and end: search selects, orders and keeps them by their start."""
    items = [_composite(m, dated=m % 2 == 0) for m in (3, 1, 2)] + [_composite(5, 2021, dated=False)]
    chosen = search.select(items, "31UFT", 2022)
    assert [i.id for i in chosen] == ["composite_2022_01", "composite_2022_02", "composite_2022_03"]
    kept, dropped = search.dedupe(chosen)
    assert [i.id for i in kept] == [i.id for i in chosen] and dropped == []
    assert time_grid.item_time(chosen[0]) == dt.datetime(2022, 1, 1)
