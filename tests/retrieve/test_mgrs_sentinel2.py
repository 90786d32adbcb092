import pytest

from lcflow.errors import LcflowError
from lcflow.retrieve import mgrs, sentinel2


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


def test_boa_offset_is_removed_once(earth_search_items, planetary_items):
    # Earth Search v1, baseline 05.09, offset already applied by the catalogue
    assert earth_search_items[0].properties["s2:processing_baseline"] == "05.09"
    assert sentinel2.boa_offset(earth_search_items[0].properties) == 0
    # Planetary Computer, baseline 02.12: no offset in the data
    assert sentinel2.boa_offset(planetary_items[0].properties) == 0
    assert sentinel2.boa_offset({"s2:processing_baseline": "04.00"}) == 1000
    assert sentinel2.boa_offset({"s2:processing_baseline": "05.10", "earthsearch:boa_offset_applied": False}) == 1000
    assert sentinel2.boa_offset({"s2:processing_baseline": "N0400"}) == 1000  # as a product's name writes it
    with pytest.raises(LcflowError, match=r"item S2X: unreadable s2:processing_baseline 'four' \(a processing baseline"):
        sentinel2.boa_offset({"s2:processing_baseline": "four"}, "S2X")


@pytest.mark.parametrize("properties, offset", [
    ({"processing:version": "05.10", "datetime": "2021-06-01T10:00:00Z"}, 1000),  # the processing extension
    ({"processing:version": "02.09", "datetime": "2023-06-01T10:00:00Z"}, 0),  # the record, not the date
    ({"datetime": "2022-03-01T10:30:00Z"}, 1000),  # no record: by the date, said in the log
    ({"datetime": "2021-03-01T10:30:00Z"}, 0),
    ({"datetime": "2022-01-24T23:30:00-01:00"}, 1000),  # 00:30 UTC on the 25th
])
def test_the_baseline_is_found_whichever_property_records_it_else_by_date(properties, offset, caplog):
    with caplog.at_level("WARNING", logger="lcflow"):
        assert sentinel2.boa_offset(properties, "S2A_X") == offset
    said = [r.getMessage() for r in caplog.records]
    if any(k in properties for k in sentinel2.BASELINE_PROPERTIES):
        assert said == []
    else:
        day = properties["datetime"][:10] if offset == 0 else ("2022-01-25" if "-01:00" in properties["datetime"]
                                                                 else properties["datetime"][:10])
        assert said == [f"item S2A_X records no processing baseline (s2:processing_baseline or processing:version): "
                        f"acquired {day}, {'on or after' if offset else 'before'} 2022-01-25, so its reflectances are "
                        f"taken to {'carry' if offset else 'lack'} the +1000 offset"]


def test_check_bands():
    assert sentinel2.check_bands(["B02", "B8A"]) == ["B02", "B8A"]
    with pytest.raises(LcflowError, match="B13"):
        sentinel2.check_bands(["B02", "B13"])
