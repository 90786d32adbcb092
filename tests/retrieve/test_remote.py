"""Scenes over HTTP: a loopback server with byte ranges, failing answers, broken files; URL signing,
duplicate acquisitions and the real catalogue responses."""

import copy
import dataclasses
import datetime as dt
import json
import shutil

import numpy as np
import pystac
import pytest
import rasterio

from lcflow.errors import LcflowError
from lcflow.retrieve import (
    cube,
    mgrs,
    radiometry,
    remote,
    scene_files,
    scene_reading,
    search,
    sentinel2,
)
from lcflow.retrieve.cube_settings import CubeSettings

from ..conftest import BANDS, SMALL_AOI
from ..http_server import serve

#: fast retries: the server fails the first requests on purpose
QUICK = remote.Network(timeout_s=10, retries=4, retry_delay_s=0.05)


def _cube_over_http(catalog_url: str, tmp_path, network=QUICK, signing="auto"):
    items = tmp_path / "items.json"
    search.run("31UFT", 2018, items, catalog=catalog_url)
    out, valid = tmp_path / "cube.tif", tmp_path / "valid.tif"
    cube.run(items, "31UFT", 2018, out, valid, CubeSettings(bands=BANDS, block_px=64, read_threads=2),
             bounds=SMALL_AOI["31UFT"], network=dataclasses.replace(network, signing=signing))
    return items, out, valid


def _same_raster(a, b) -> bool:
    with rasterio.open(a) as x, rasterio.open(b) as y:
        return x.tags() == y.tags() and x.transform == y.transform and np.array_equal(x.read(), y.read())


def test_http_catalog_gives_the_cube_of_the_local_path(demo, stages, tmp_path):
    with serve(demo / "catalog") as server:
        items, out, valid = _cube_over_http(f"{server.url}/catalog.json", tmp_path)
    manifest = json.loads(items.read_text())
    hrefs = [a["href"] for f in manifest["features"] for a in f["assets"].values()]
    assert hrefs and all(h.startswith(server.url + "/") for h in hrefs)
    assert manifest["lcflow:source"]["catalog"] == f"{server.url}/catalog.json"
    assert [f["id"] for f in manifest["features"]] == [i.id for i in search.read_manifest(stages["items2018"])]
    assert _same_raster(out, stages["cube2018"]) and _same_raster(valid, stages["valid2018"])
    assert server.statuses[206] >= len(BANDS)  # COGs were read by byte ranges


def test_a_busy_server_is_retried_and_the_cube_completes(demo, stages, tmp_path):
    with serve(demo / "catalog", fail_first=2) as server:
        _, out, _ = _cube_over_http(f"{server.url}/catalog.json", tmp_path)
    assert server.statuses[503] >= 2 * len(BANDS)  # every file read was refused twice first
    assert _same_raster(out, stages["cube2018"])


def test_a_server_that_stays_down_ends_the_job_naming_the_asset(demo, tmp_path):
    with serve(demo / "catalog", fail_first=10**6) as server:
        with pytest.raises(LcflowError) as err:
            _cube_over_http(f"{server.url}/catalog.json", tmp_path, network=remote.Network(retries=1, retry_delay_s=0.01))
    message = str(err.value)
    assert "tile 31UFT 2018: reading item S2" in message and "asset" in message and server.url in message
    assert "503" in message
    assert not (tmp_path / "cube.tif").exists() and not (tmp_path / "valid.tif").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["items.json"]  # no staging folder left either


def test_a_server_going_down_mid_job_keeps_the_last_cube_and_a_rerun_completes(demo, stages, tmp_path, monkeypatch):
    """The server stops answering after every scene file was read from: the job fails naming the
    asset, the cube of the previous run is still there unchanged, no staging is left; once the server
    is back, the same command builds the cube again."""
    out, valid = tmp_path / "cube.tif", tmp_path / "valid.tif"
    shutil.copy(stages["cube2018"], out)  # the previous run's
    shutil.copy(stages["valid2018"], valid)
    before = out.stat().st_mtime_ns
    files = 11 * len(search.read_manifest(stages["items2018"]))  # 10 bands and SCL per scene
    with serve(demo / "catalog") as server:
        # each run reads from the server, as separate jobs would (GDAL keeps fetched ranges per process)
        monkeypatch.setenv("CPL_VSIL_CURL_NON_CACHED", f"/vsicurl/{server.url}")
        server.down_after = 2 * files
        with pytest.raises(LcflowError, match="reading item S2.* asset .*503"):
            _cube_over_http(f"{server.url}/catalog.json", tmp_path, network=remote.Network(retries=1, retry_delay_s=0.01))
        assert server.statuses[206] > 0 and server.statuses[503] > 0  # it failed on the way
        assert out.stat().st_mtime_ns == before and _same_raster(out, stages["cube2018"])
        assert sorted(p.name for p in tmp_path.iterdir()) == ["cube.tif", "items.json", "valid.tif"]
        server.down_after = None
        _cube_over_http(f"{server.url}/catalog.json", tmp_path)
    assert out.stat().st_mtime_ns != before
    assert _same_raster(out, stages["cube2018"]) and _same_raster(valid, stages["valid2018"])


def test_a_truncated_cog_names_item_and_asset_and_leaves_no_cube(demo, stages, tmp_path):
    served = tmp_path / "catalog"
    shutil.copytree(demo / "catalog", served)
    victim = search.read_manifest(stages["items2018"])[3]
    folder = f"31UFT_2018/sentinel-2-l2a/{victim.id}"
    scene = served / folder / "B08.tif"
    scene.write_bytes(scene.read_bytes()[: scene.stat().st_size // 3])
    work = tmp_path / "work"
    work.mkdir()
    signed = []

    def stub_signer(href: str) -> str:  # a signature the error must not show
        signed.append(href)
        return f"{href}?se=2030-01-01&sig=SECRET"

    with serve(served) as server, pytest.MonkeyPatch.context() as mp:
        mp.setitem(remote.SIGNERS, "planetary-computer", lambda: stub_signer)
        with pytest.raises(LcflowError) as err:
            _cube_over_http(f"{server.url}/catalog.json", work, signing="planetary-computer")
    message = str(err.value)
    assert f"item {victim.id} asset nir ({server.url}/{folder}/B08.tif) failed" in message
    assert "SECRET" not in message and "sig=" not in message
    assert signed  # the URLs were signed as they were read
    assert sorted(p.name for p in work.iterdir()) == ["items.json"]
    manifest = json.loads((work / "items.json").read_text())
    assert not any("?" in a["href"] for f in manifest["features"] for a in f["assets"].values())  # stored unsigned


def test_signed_urls_are_read(demo, stages, tmp_path):
    """The signer sees every asset URL as it is read (never the manifest), and the cube is the same."""
    signed = set()

    def stub_signer(href: str) -> str:
        signed.add(href.split("?")[0])
        return f"{href}?sig=abc"

    with serve(demo / "catalog") as server, pytest.MonkeyPatch.context() as mp:
        mp.setitem(remote.SIGNERS, "planetary-computer", lambda: stub_signer)
        items, out, _ = _cube_over_http(f"{server.url}/catalog.json", tmp_path, signing="planetary-computer")
    keys = [sentinel2.asset_key(search.read_manifest(items)[0].assets, b) for b in [*BANDS, "SCL"]]
    assert signed == {i.assets[k].href for i in search.read_manifest(items) for k in keys}
    assert _same_raster(out, stages["cube2018"])


def test_real_catalogue_items_parse_and_sign_as_their_catalogue_needs(earth_search_items, planetary_items, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setitem(remote.SIGNERS, "planetary-computer", lambda: lambda href: href + "?sig=stub")
    for items, tile, epsg, when, offset, signs in [
        (earth_search_items, "13TDE", 32613, [dt.date(2023, 10, 8)], 0, False),
        (planetary_items, "35MNM", 32735, sorted({i.datetime.date() for i in planetary_items}), 0, True),
    ]:
        path = tmp_path / f"{tile}.json"
        path.write_text(json.dumps(pystac.ItemCollection(items).to_dict(transform_hrefs=False)))
        manifest = search.read_manifest(path)
        assert {search.item_tile(i) for i in manifest} == {tile}
        assert sorted({i.datetime.date() for i in manifest}) == when
        assert {sentinel2.item_epsg(i.properties) for i in manifest} == {epsg}
        layout = cube.check_items(manifest, tile, when[0].year, CubeSettings(bands=BANDS))
        assert {radiometry.scaling(i, i.assets[s.key].extra_fields, 1).bias
                for i in manifest for s in layout.bands.values()} == {offset}
        for item in manifest:
            for band, source in layout.bands.items():
                href = item.assets[source.key].href
                assert href.startswith("https://") and href.endswith(".tif") and band in href.rsplit("/", 1)[1]
            assert "SCL" in item.assets[layout.mask.key].href
        sign = remote.signer("auto", manifest)
        assert (sign is not None) == signs
        if signs:
            assert sign(manifest[0].assets["B02"].href).endswith("?sig=stub")
        assert remote.signer("none", manifest) is None
    # from baseline 04.00 Planetary Computer leaves the +1000 offset in the pixels (and records it in no
    # raster:bands); Earth Search says it removed it, whatever its raster:bands offset of -0.1 says
    later = copy.deepcopy(planetary_items[0])
    later.properties["s2:processing_baseline"] = "04.00"
    assert radiometry.scaling(later, later.assets["B02"].extra_fields, 1).bias == -1000
    es = earth_search_items[0]
    assert es.properties["s2:processing_baseline"] == "05.09" and es.properties["earthsearch:boa_offset_applied"]
    assert es.assets["blue"].extra_fields["raster:bands"][0]["offset"] == -0.1
    assert radiometry.scaling(es, es.assets["blue"].extra_fields, 1) == radiometry.Scaling(
        1.0, 0.0, "earthsearch:boa_offset_applied")


def _reprocessed(item: pystac.Item, new_id: str, baseline: str, generated: str) -> pystac.Item:
    twin = item.clone()
    twin.id = new_id
    twin.properties["s2:processing_baseline"] = baseline
    twin.properties["s2:generation_time"] = generated
    return twin


def test_duplicate_acquisitions_keep_the_newest_baseline(earth_search_items):
    original = earth_search_items[0]
    old = _reprocessed(original, "S2A_13TDE_20231008_1_L2A", "04.00", "2023-01-01T00:00:00Z")
    old.datetime = original.datetime + dt.timedelta(milliseconds=300)  # reprocessing may move the time a little
    other_day = _reprocessed(original, "S2A_13TDE_20231011_0_L2A", "04.00", "2023-10-11T00:00:00Z")
    other_day.datetime = original.datetime + dt.timedelta(days=3)
    kept, dropped = search.dedupe([old, original, other_day])
    assert [i.id for i in kept] == [original.id, other_day.id]
    assert dropped == [{"id": old.id, "kept": original.id, "baseline": "04.00", "kept_baseline": "05.09"}]
    # the same baseline twice: the later generation wins, whatever the order
    again = _reprocessed(original, "S2A_13TDE_20231008_2_L2A", "05.09", "2024-02-01T00:00:00Z")
    for order in ([original, again], [again, original]):
        kept, dropped = search.dedupe(order)
        assert [i.id for i in kept] == [again.id] and dropped[0]["id"] == original.id


def test_search_records_the_dropped_duplicates_in_the_manifest(demo, tmp_path):
    served = tmp_path / "catalog"
    shutil.copytree(demo / "catalog", served)
    catalog = pystac.Catalog.from_file(str(served / "catalog.json"))
    items = sorted((i for i in catalog.get_items(recursive=True) if search.item_tile(i) == "31UFT"
                    and i.datetime.year == 2018), key=lambda i: i.datetime)
    first = items[0]
    twin = _reprocessed(first, first.id.replace("_0_", "_1_"), "05.00", "2024-01-01T00:00:00Z")
    twin.make_asset_hrefs_absolute()  # the original's files, wherever the twin is saved
    twin.set_self_href(None)
    parent = first.get_parent()
    parent.add_item(twin)
    catalog.normalize_and_save(str(served), catalog_type=pystac.CatalogType.SELF_CONTAINED)
    out = tmp_path / "items.json"
    n = search.run("31UFT", 2018, out, catalog=str(served / "catalog.json"))
    manifest = json.loads(out.read_text())
    ids = [f["id"] for f in manifest["features"]]
    assert n == len(items) and twin.id in ids and first.id not in ids
    assert manifest["lcflow:dropped"] == [{"id": first.id, "kept": twin.id, "kept_baseline": "05.00",
                                           "baseline": first.properties["s2:processing_baseline"]}]


def test_gdal_settings_are_in_one_place():
    options = remote.Network(timeout_s=30, retries=3, retry_delay_s=0.5).gdal_options()
    assert options["GDAL_HTTP_TIMEOUT"] == "30" and options["GDAL_HTTP_MAX_RETRY"] == "3"
    assert options["GDAL_HTTP_RETRY_DELAY"] == "0.5" and options["GDAL_DISABLE_READDIR_ON_OPEN"] == "EMPTY_DIR"
    assert "AWS_S3_ENDPOINT" not in options
    cdse = remote.Network(s3_endpoint=remote.CDSE_S3_ENDPOINT).gdal_options()
    assert cdse["AWS_S3_ENDPOINT"] == "eodata.dataspace.copernicus.eu" and cdse["AWS_VIRTUAL_HOSTING"] == "FALSE"
    assert not any("SECRET" in k or "ACCESS_KEY" in k for k in cdse)  # credentials come from the environment only


def test_redact_cuts_credentials_and_signatures():
    text = ("HTTP error 403 on https://user:pa55@host.example/a/b.tif?se=2030&sig=XYZ and "
            "/vsicurl/https://acc.blob.core.windows.net/c/B02.tif?st=1&sig=ABC, local /data/x.tif")
    assert remote.redact(text) == ("HTTP error 403 on https://host.example/a/b.tif and "
                                   "/vsicurl/https://acc.blob.core.windows.net/c/B02.tif, local /data/x.tif")


def test_copernicus_items_name_bands_at_their_resolution_and_their_s3_endpoint(earth_search_items):
    item = earth_search_items[0].clone()
    item.assets = {f"{b}_{sentinel2.BAND_RESOLUTION[b]}m": pystac.Asset(f"s3://eodata/Sentinel-2/MSI/L2A/x/{b}.jp2")
                   for b in [*BANDS, "SCL"]}
    layout = cube.check_items([item], "13TDE", 2023, CubeSettings(bands=BANDS))
    assert layout.bands["B02"].key == "B02_10m" and layout.bands["B8A"].key == "B8A_20m"
    assert layout.mask.key == "SCL_20m"
    assert remote.s3_endpoint([item]) == remote.CDSE_S3_ENDPOINT
    assert remote.s3_endpoint(earth_search_items) is None
    assert remote.signer("auto", [item]) is None


def test_real_catalogue_items_have_their_20m_bands_read_on_their_own_grid(earth_search_items, planetary_items):
    """Earth Search's and Planetary Computer's files as their items describe them (proj:transform): every
    asset is read as stored, the 10 m bands as they are, the 20 m bands interpolated and SCL by nearest
    neighbour, nothing warped by GDAL."""
    from affine import Affine

    from lcflow.retrieve.asset_reader import FileFacts

    bands = ["B02", "B03", "B04", "B05", "B06", "B07", "B08", "B8A", "B11", "B12"]
    for items, tile in ((earth_search_items, "13TDE"), (planetary_items, "35MNM")):
        layout = cube.check_items(items, tile, items[0].datetime.year, CubeSettings(bands=bands))
        keys = [layout.bands[b].key for b in bands] + [layout.mask.key]
        grid = cube.tile_grid(tile, items, 10.0, None)  # the whole tile, from the items' proj:transform
        assert (grid.width, grid.height) == (10980, 10980) and grid.crs.to_epsg() == mgrs.tile_epsg(tile)
        assert (grid.transform.c, grid.transform.f) == tuple(items[0].assets[keys[0]].extra_fields["proj:transform"][i]
                                                             for i in (2, 5))

        def header(item, key, epsg=None, tile=tile):
            epsg = epsg or mgrs.tile_epsg(tile)
            fields = item.assets[key].extra_fields
            return FileFacts(Affine(*fields["proj:transform"][:6]), tuple(fields["proj:shape"]), epsg, 1,
                             ("uint16",), (0.0,), ((1.0, 0.0),))

        files = scene_files.survey(items, layout, header, grid, tile)
        assert set(files.native) == set(keys), tile
        methods = {b: scene_reading.resampling_method(files.native[layout.reads[b].key], grid, b == "mask")
                   for b in layout.reads}
        assert [b for b in bands if methods[b] == "bilinear"] == ["B05", "B06", "B07", "B8A", "B11", "B12"], tile
        assert [b for b in layout.reads if methods[b] == "nearest"] == ["B02", "B03", "B04", "B08", "mask"], tile
        assert {(t.a, t.c, t.f) for t in files.native.values()} == {(10.0, grid.transform.c, grid.transform.f),
                                                                   (20.0, grid.transform.c, grid.transform.f)}
        other_zone = scene_files.survey(items, layout, lambda i, k: header(i, k, epsg=32632), grid, tile)
        assert other_zone.native == {}  # not the tile's CRS: warped
    for item, tile in [(earth_search_items[0], "13TDE"), (planetary_items[0], "35MNM")]:
        assert mgrs.tile_epsg(tile) == sentinel2.item_epsg(item.properties)
    assert sentinel2.item_epsg({"proj:code": "EPSG:32631"}) == 32631
    assert sentinel2.item_epsg({}) is None
