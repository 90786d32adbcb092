import json

import pytest

from lcflow.errors import LcflowError
from lcflow.retrieve import search, stac_sources


def test_item_tile_from_each_catalogue(earth_search_items, planetary_items):
    assert search.item_tile(earth_search_items[0]) == "13TDE"
    assert {search.item_tile(i) for i in planetary_items} == {"35MNM"}


def test_an_item_s_year_is_its_utc_year_as_the_cube_counts_it(planetary_items):
    """2018-12-31T23:30:00-01:00 is 00:30 UTC on 1 January 2019: searched for 2019, not 2018, so the
    cube of each year holds it (lcflow cube refuses an item of another UTC year)."""
    import datetime as dt

    item = planetary_items[0].clone()
    item.datetime = dt.datetime(2018, 12, 31, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-1)))
    assert search.select([item], "35MNM", 2018) == []
    assert search.select([item], "35MNM", 2019) == [item]


def test_select_by_tile_year_and_cloud_cover(planetary_items):
    chosen = search.select(planetary_items, "35MNM", 2020)
    assert len(chosen) == 13
    assert [i.datetime for i in chosen] == sorted(i.datetime for i in planetary_items)
    assert search.select(planetary_items, "35MNM", 2019) == []
    assert search.select(planetary_items, "31UFT", 2020) == []
    limit = sorted(i.properties["eo:cloud_cover"] for i in planetary_items)[5]
    assert all(i.properties["eo:cloud_cover"] <= limit for i in search.select(planetary_items, "35MNM", 2020, limit))
    assert len(search.select(planetary_items, "35MNM", 2020, limit)) == 6


def test_tile_query_follows_the_endpoint():
    assert stac_sources.tile_query("https://earth-search.aws.element84.com/v1", "31UFT") == {"grid:code": {"eq": "MGRS-31UFT"}}
    assert stac_sources.tile_query("https://planetarycomputer.microsoft.com/api/stac/v1", "31UFT") == {"s2:mgrs_tile": {"eq": "31UFT"}}


def test_manifest_from_local_catalog(demo, tmp_path):
    out = tmp_path / "items.json"
    n = search.run("32ULC", 2019, out, catalog=str(demo / "catalog" / "catalog.json"))
    manifest = json.loads(out.read_text())
    assert manifest["type"] == "FeatureCollection" and len(manifest["features"]) == n
    assert 12 <= n <= 20
    for f in manifest["features"]:
        assert f["properties"]["grid:code"] == "MGRS-32ULC"
        assert f["properties"]["datetime"].startswith("2019")
        assert f["assets"]["red"]["href"].startswith("/")  # absolute: stages never depend on the catalog layout
    items = search.read_manifest(out)
    assert [i.id for i in items] == [f["id"] for f in manifest["features"]]


def test_no_item_names_tile_and_year(demo, tmp_path):
    with pytest.raises(LcflowError, match="31UFT in 2021"):
        search.run("31UFT", 2021, tmp_path / "items.json", catalog=str(demo / "catalog" / "catalog.json"))
    assert not (tmp_path / "items.json").exists()
    with pytest.raises(LcflowError, match="does not exist"):
        search.run("31UFT", 2018, tmp_path / "items.json", catalog=str(tmp_path / "nope.json"))
    with pytest.raises(LcflowError, match="exactly one"):
        search.run("31UFT", 2018, tmp_path / "items.json")


def test_a_stac_api_search_gives_the_manifest_of_the_static_catalog(demo, tmp_path):
    """pystac-client against a STAC API (loopback, paged by "next" links): the tile's items of the year,
    found by the tile's centre as for Copernicus Data Space, are those the static catalog gives."""
    from ..stac_api import serve_api

    local = tmp_path / "local.json"
    search.run("31UFT", 2018, local, catalog=str(demo / "catalog" / "catalog.json"))
    with serve_api(demo / "catalog" / "catalog.json", page_size=3) as api:
        n = search.run("31UFT", 2018, tmp_path / "api.json", api=f"{api.url}/", max_cloud_cover=100)
    assert api.searches["POST"] > 2  # several pages were followed
    got, want = search.read_manifest(tmp_path / "api.json"), search.read_manifest(local)
    assert n == len(want) > 3 and [i.id for i in got] == [i.id for i in want]
    assert {i.datetime.year for i in got} == {2018} and {search.item_tile(i) for i in got} == {"31UFT"}
    source = json.loads((tmp_path / "api.json").read_text())["lcflow:source"]
    assert source["api"] == f"{api.url}/" and source["collection"] == "sentinel-2-l2a"


def test_a_failing_stac_api_is_named_with_tile_year_and_collection(demo, tmp_path):
    from ..stac_api import serve_api

    with serve_api(demo / "catalog" / "catalog.json") as api:
        api.failing = True
        with pytest.raises(LcflowError) as err:
            search.run("31UFT", 2019, tmp_path / "items.json", api=f"{api.url}/", collection="sentinel-2-l2a")
    text = str(err.value)
    assert f"STAC search of tile 31UFT 2019 at {api.url}/ (collection sentinel-2-l2a) failed" in text
    assert "database unavailable" in text or "500" in text
    assert not (tmp_path / "items.json").exists()
