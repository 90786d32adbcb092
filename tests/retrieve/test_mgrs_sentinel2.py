import datetime as dt

import pystac
import pytest

from lcflow.errors import LcflowError
from lcflow.retrieve import mgrs, radiometry, sentinel2


@pytest.mark.parametrize("tile,epsg", [("31UFT", 32631), ("32ULC", 32632), ("13TDE", 32613), ("35MNM", 32735),
                                       ("01CAA", 32701), ("60XVV", 32660)])
def test_tile_epsg(tile, epsg):
    assert mgrs.tile_epsg(tile) == epsg


@pytest.mark.parametrize("bad", ["31UF", "31UFTX", "61UFT", "00UFT", "31IFT", "31UOT", "31UFW", "31uft", 31])
def test_bad_tile_is_named(bad):
    with pytest.raises(LcflowError, match=repr(bad).replace("(", r"\(")):
        mgrs.check_tile(bad)


def test_tile_epsg_agrees_with_real_items(earth_search_items, planetary_items):
    for item, tile in [(earth_search_items[0], "13TDE"), (planetary_items[0], "35MNM")]:
        assert mgrs.tile_epsg(tile) == sentinel2.item_epsg(item.properties)
    assert sentinel2.item_epsg({"proj:code": "EPSG:32631"}) == 32631
    assert sentinel2.item_epsg({}) is None


def test_asset_keys_of_both_catalogue_styles(earth_search_items, planetary_items):
    es, pc = earth_search_items[0].assets, planetary_items[0].assets
    assert sentinel2.asset_key(es, "B02") == "blue"
    assert sentinel2.asset_key(es, "B8A") == "nir08"
    assert sentinel2.asset_key(es, "SCL") == "scl"
    assert sentinel2.asset_key(pc, "B8A") == "B8A"
    assert sentinel2.asset_key(pc, "SCL") == "SCL"
    with pytest.raises(LcflowError, match="B01"):
        sentinel2.asset_key({"blue": {}}, "B01")


def _item(properties: dict, item_id: str = "S2A_X") -> pystac.Item:
    return pystac.Item(item_id, None, None, dt.datetime(2023, 1, 1), properties)


def test_boa_offset_is_removed_once(earth_search_items, planetary_items):
    # Earth Search v1, baseline 05.09, offset already applied by the catalogue (its raster:bands' -0.1 is not)
    es = earth_search_items[0]
    assert es.properties["s2:processing_baseline"] == "05.09"
    assert radiometry.scaling(es, es.assets["red"].extra_fields, 1).bias == 0
    # Planetary Computer, baseline 02.12: no offset in the data
    pc = planetary_items[0]
    assert radiometry.scaling(pc, pc.assets["B04"].extra_fields, 1) == radiometry.Scaling(
        1.0, 0.0, "processing baseline 02.12")
    for properties in ({"s2:processing_baseline": "04.00"},
                       {"s2:processing_baseline": "05.10", "earthsearch:boa_offset_applied": False},
                       {"s2:processing_baseline": "N0400"}):  # as a product's name writes it
        assert radiometry.scaling(_item(properties), {}, 1).bias == -1000
    # raster:bands as the item gives them, scale included: DN x scale + offset, in reflectance x 10000
    fields = {"raster:bands": [{"scale": 0.0001, "offset": -0.1}, {"scale": 0.0002, "offset": 0.05}]}
    assert radiometry.scaling(_item({}), fields, 1) == radiometry.Scaling(1.0, -1000.0, "raster:bands")
    assert radiometry.scaling(_item({}), fields, 2) == radiometry.Scaling(2.0, 500.0, "raster:bands")
    with pytest.raises(LcflowError, match=r"item S2X: unreadable s2:processing_baseline 'four' \(a processing baseline"):
        radiometry.scaling(_item({"s2:processing_baseline": "four"}, "S2X"), {}, 1)


@pytest.mark.parametrize("properties, offset", [
    ({"processing:version": "05.10"}, -1000),  # the processing extension
    ({"processing:version": "02.09"}, 0),  # the record, not the date
])
def test_the_baseline_is_found_whichever_property_records_it(properties, offset):
    assert radiometry.scaling(_item(properties), {}, 1).bias == offset


def test_an_item_that_records_no_offset_is_refused_unless_the_config_says_it():
    """No guess by the date: a composite of 2022 whose offset was removed would lose 0.1 of reflectance."""
    item = _item({"datetime": "2022-03-01T10:30:00Z"}, "composite_2022_03")
    with pytest.raises(LcflowError) as refused:
        radiometry.scaling(item, {"raster:bands": [{"nodata": 65535}]}, 1)
    assert str(refused.value) == (
        "item composite_2022_03 records no offset (no raster:bands scale or offset, no s2:processing_baseline or "
        "processing:version, no earthsearch:boa_offset_applied): set cube.boa_add_offset, 0 for products whose "
        "offset is removed (composites, harmonised collections) or -1000 for Sentinel-2 L2A of processing baseline "
        "04.00 and later (acquired from 25 January 2022)")
    for configured in (0, -1000):
        said = radiometry.scaling(item, {}, 1, configured)
        assert said == radiometry.Scaling(1.0, float(configured), "cube.boa_add_offset")
    # a record wins over the config
    assert radiometry.scaling(_item({"processing:version": "02.09"}), {}, 1, -1000).bias == 0


def test_nodata_as_the_asset_the_file_or_the_product_says():
    assert radiometry.nodata({"raster:bands": [{"nodata": 65535}]}, 1, 0) == 65535
    assert radiometry.nodata({"raster:bands": [{"nodata": "nan"}]}, 1, None) != radiometry.nodata({}, 1, None)
    assert radiometry.nodata({"raster:bands": [{}]}, 1, 65535.0) == 65535  # the file's tag
    assert radiometry.nodata({}, 1, None) == 0  # Sentinel-2 L2A's documented 0
    assert radiometry.nodata({"raster:bands": [{"nodata": 0}, {"nodata": 7}]}, 2, None) == 7


def test_check_bands():
    assert sentinel2.check_bands(["B02", "B8A"]) == ["B02", "B8A"]
    with pytest.raises(LcflowError, match="B13"):
        sentinel2.check_bands(["B02", "B13"])
