"""A user's own monthly composites (tests/composites.py): each month in its own step, no nodata value in the
cube, no offset taken that no record or setting gives, items of `datetime: null` read, no mask asset."""

import json

import numpy as np
import pytest
import rasterio

from lcflow.errors import LcflowError
from lcflow.retrieve import cube, search
from lcflow.retrieve.composite import NODATA as CUBE_NODATA
from lcflow.retrieve.cube_settings import CubeSettings

from ..composites import BANDS, NODATA, read_composite, write_composites
from ..conftest import SMALL_AOI

COMPOSITES = dict(bands=tuple(BANDS), mask="none", boa_add_offset=0, block_px=64)


@pytest.fixture(scope="module")
def composites(demo, tmp_path_factory):
    return write_composites(demo, tmp_path_factory.mktemp("composites") / "catalogue")


def _cube(manifest, out, settings, year):
    cube.run(manifest, "31UFT", year, out / "c.tif", out / "v.tif", settings, bounds=SMALL_AOI["31UFT"])
    with rasterio.open(out / "c.tif") as ds:
        steps = len(json.loads(ds.tags()["time_steps"]))
        return ds.read().reshape(steps, len(BANDS), ds.height, ds.width), ds.tags()


@pytest.mark.parametrize("period", ["P1M", None])
def test_each_month_is_its_own_step_with_the_composites_values(composites, tmp_path, period):
    """On a monthly grid, and on the 12 equal windows (centres mid-month) alike: month m in step m - 1, its
    values the composite's DNs (offset 0, as cube.boa_add_offset says), 65535 nowhere, a month of no data
    (no scene) empty."""
    for year, count in ((2018, 12), (2019, 8)):
        search.run("31UFT", year, tmp_path / f"{year}.json", catalog=str(composites))
        assert len(search.read_manifest(tmp_path / f"{year}.json")) == count
        (tmp_path / str(year)).mkdir()
        got, tags = _cube(tmp_path / f"{year}.json", tmp_path / str(year), CubeSettings(**COMPOSITES, period=period),
                          year)
        assert json.loads(tags["item_steps"]) == {f"composite_31UFT_{year}_{m:02d}": m - 1 for m in range(1, count + 1)}
        assert tags["period"] == (period or "12 equal windows") and tags["mask"] == "none"
        assert not (got == NODATA).any() and not (got.astype(np.int32) == 32767).any()
        empty = 0
        for month in range(1, count + 1):
            source = read_composite(composites, year, month)
            has = source != NODATA
            assert np.array_equal(got[month - 1][has], source[has].astype(np.int16)), (year, month)
            assert (got[month - 1][~has] == CUBE_NODATA).all()
            empty += not has.any()
        assert (got[count:] == CUBE_NODATA).all()
        assert empty >= 1 or year == 2019  # the demo has months without a scene


def test_composites_that_record_no_offset_are_refused_until_the_config_says_it(composites, tmp_path):
    search.run("31UFT", 2018, tmp_path / "items.json", catalog=str(composites))
    settings = CubeSettings(**{**COMPOSITES, "boa_add_offset": None})
    with pytest.raises(LcflowError) as refused:
        cube.run(tmp_path / "items.json", "31UFT", 2018, tmp_path / "c.tif", tmp_path / "v.tif", settings,
                 bounds=SMALL_AOI["31UFT"])
    assert str(refused.value).startswith("item composite_31UFT_2018_01 records no offset (no raster:bands scale or "
                                         "offset, no s2:processing_baseline or processing:version, no "
                                         "earthsearch:boa_offset_applied): set cube.boa_add_offset")
    with pytest.raises(LcflowError, match=r"has no asset for band SCL .*; products without a scene classification "
                                          r"take cube.mask: none .* or cube.mask: asset"):
        cube.run(tmp_path / "items.json", "31UFT", 2018, tmp_path / "c.tif", tmp_path / "v.tif",
                 CubeSettings(**{**COMPOSITES, "mask": "scl"}), bounds=SMALL_AOI["31UFT"])
    assert not list(tmp_path.glob("*.tif"))


def test_two_composites_in_one_step_are_warned_about(composites, tmp_path, caplog):
    search.run("31UFT", 2018, tmp_path / "items.json", catalog=str(composites))
    with caplog.at_level("WARNING", logger="lcflow"):
        _cube(tmp_path / "items.json", tmp_path, CubeSettings(**COMPOSITES, period="P3M"), 2018)
    said = [r.getMessage() for r in caplog.records if "composites" in r.getMessage()]
    assert len(said) == 4 and said[0] == (
        "tile 31UFT 2018: step 0 (2018-02-15) holds 3 composites (composite_31UFT_2018_01, composite_31UFT_2018_02, "
        "composite_31UFT_2018_03): their median is taken; a grid of their own period (cube.period) keeps them apart")
