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
    assert sentinel2.boa_offset({}) == 0
    with pytest.raises(LcflowError, match="baseline"):
        sentinel2.boa_offset({"s2:processing_baseline": "N0400"})


def test_check_bands():
    assert sentinel2.check_bands(["B02", "B8A"]) == ["B02", "B8A"]
    with pytest.raises(LcflowError, match="B13"):
        sentinel2.check_bands(["B02", "B13"])
