"""Consistent annual maps (lcflow.maps.consistent): the windowed job on small rasters, its maps, change
maps, summary, figure and STAC items."""

import json
from pathlib import Path

import numpy as np
import pytest
import rasterio

from lcflow.common.raster import Grid
from lcflow.errors import LcflowError
from lcflow.labels import nomenclature
from lcflow.maps import change, change_summary
from lcflow.maps import consistent as consistent_maps
from lcflow.maps.consistency_settings import ConsistencySettings
from lcflow.maps.predict import PROBABILITY_NODATA, PROBABILITY_SCALE


def _write_probabilities(path, proba, grid, classes, empty=None):
    """A probability raster as lcflow predict writes it, from (classes, rows, cols) probabilities."""
    data = np.round(proba * PROBABILITY_SCALE).astype(np.uint8)
    if empty is not None:
        data[:, empty] = PROBABILITY_NODATA
    with rasterio.open(path, "w", driver="GTiff", dtype="uint8", count=len(classes), nodata=PROBABILITY_NODATA,
                       **grid.profile()) as dst:
        dst.write(data)
        dst.update_tags(class_codes=json.dumps(classes), model="test",
                        class_names=json.dumps({str(c): f"class {c}" for c in classes}),
                        class_colors=json.dumps({str(c): [c % 256, 100, (200 - c) % 256] for c in classes}))


def _series(tmp_path, size=64):
    """Two years of 3 classes (codes 31, 32, 21): a 10 x 12 px block changes 31 -> 32; the classifier
    is right but unsure, and wrong on 60 scattered single pixels in the second year."""
    rng = np.random.default_rng(0)
    grid = Grid.from_bounds(32631, (640000, 5760000, 640000 + 10 * size, 5760000 + 10 * size), 10)
    classes = [21, 31, 32]
    truth = np.zeros((2, size, size), dtype=int)
    truth[:, :, size // 2:] = 1
    truth[1, 20:30, 40:52] = 2  # the change
    outside = np.flatnonzero(truth[0].ravel() == truth[1].ravel())
    flips = rng.choice(outside, 60, replace=False)
    paths = []
    for t in range(2):
        proba = np.full((3, size, size), 0.1)
        np.put_along_axis(proba, truth[t][None], 0.8, axis=0)
        seen = truth[t].ravel().copy()
        wrong = (seen[flips] + 1) % 3
        flat = proba.reshape(3, -1)
        if t == 1:
            flat[:, flips] = 0.2
            flat[wrong, flips] = 0.6  # a confident-looking error, in one year only
        empty = np.zeros((size, size), bool)
        empty[:4, :4] = True  # no data in a corner
        paths.append(tmp_path / f"p{t}.tif")
        _write_probabilities(paths[-1], proba, grid, classes, empty)
    return paths, truth, grid, classes


def _run(tmp_path, paths, block=64, name="out", **kw):
    d = tmp_path / name
    settings = {k: kw.pop(k) for k in ("evidence_ratio", "min_change_ha") if k in kw}
    out = consistent_maps.SeriesOutputs.of([d / "m18.tif", d / "m19.tif"], [d / "c18.tif", d / "c19.tif"],
                                           [d / "change.tif"], d / "summary.json")
    return consistent_maps.run(paths, [2018, 2019], out, ConsistencySettings(**settings), block=block, **kw), d

def test_consistent_maps_keep_stable_land_and_find_the_change(tmp_path):
    paths, truth, grid, classes = _series(tmp_path)
    # truth rasters in CLC level-3 codes, mapped to level 2 by the nomenclature (21, 31, 32)
    level3 = np.array([211, 311, 324])
    truths = []
    for t in range(2):
        truths.append(tmp_path / f"truth{t}.tif")
        with rasterio.open(truths[-1], "w", driver="GTiff", dtype="uint16", count=1, **grid.profile()) as dst:
            dst.write(level3[truth[t]].astype(np.uint16), 1)
    result, d = _run(tmp_path, paths, truths=truths, nomenclature=nomenclature.clc_level(2),
                     evidence_ratio=4, min_change_ha=0.05)
    assert result["min_change_px"] == 5
    with rasterio.open(d / "m18.tif") as a, rasterio.open(d / "m19.tif") as b, rasterio.open(d / "change.tif") as c:
        m18, m19, ch = a.read(1), b.read(1), c.read(1)
        assert a.tags(ns="IMAGE_STRUCTURE")["LAYOUT"] == "COG" and a.colormap(1)[31][:3] == (31, 100, 169)
        table = {r["code"]: r for r in json.loads(c.tags()["change_classes"])}
        assert c.colormap(1)[0][:3] == change.STABLE_COLOR
    codes = np.asarray(classes)
    expected = [codes[truth[0]], codes[truth[1]]]
    inside = np.ones(m18.shape, bool)
    inside[:4, :4] = False
    assert (m18[~inside] == 255).all() and (ch[~inside] == change.CHANGE_NODATA).all()
    assert np.array_equal(m18[inside], expected[0][inside]) and np.array_equal(m19[inside], expected[1][inside])
    block = np.zeros(m18.shape, bool)
    block[20:30, 40:52] = True
    change_code = 1 + 1 * 3 + 2  # index 1 (31) -> index 2 (32)
    assert (ch[block] == change_code).all() and (ch[inside & ~block] == change.STABLE).all()
    assert table[change_code]["from"] == 31 and table[change_code]["to"] == 32
    pair = result["pairs"][0]
    c, r = pair["consistent"], pair["raw"]
    assert c["pixels"] == 64 * 64 - 16
    assert c["change_matrix_ha"][1][2] == pytest.approx(120 * 100 / 1e4)  # 120 px of 100 m2
    assert c["agreement"] == pytest.approx(1 - 120 / c["pixels"])
    assert r["changed_fraction"] > c["changed_fraction"]  # the scattered errors changed the raw maps
    assert c["truth"]["stable_kept"] == 1.0 and c["truth"]["change_f1"] == 1.0
    assert r["truth"]["stable_kept"] < 0.99 and r["truth"]["change_f1"] < 0.9
    oa = result["truth_overall_accuracy"]
    assert oa["consistent"] == [1.0, 1.0] and oa["raw"][1] < 1.0
    tsv = change_summary.summary_table([d / "summary.json"]).splitlines()
    assert tsv[1].split("\t")[:3] == ["summary", "test", "2018-2019"]


def test_windows_give_the_maps_of_one_window(tmp_path):
    paths, *_ = _series(tmp_path)
    _run(tmp_path, paths, block=64, name="one")
    _run(tmp_path, paths, block=16, name="many")
    for f in ("m18.tif", "m19.tif", "c19.tif", "change.tif"):
        with rasterio.open(tmp_path / "one" / f) as a, rasterio.open(tmp_path / "many" / f) as b:
            assert np.array_equal(a.read(), b.read()), f


def test_years_of_different_models_are_refused_before_writing(tmp_path):
    paths, truth, grid, classes = _series(tmp_path)
    other = tmp_path / "other.tif"
    _write_probabilities(other, np.full((2, 64, 64), 0.5), grid, [21, 31])
    with pytest.raises(LcflowError, match="other.tif.*not of one model"):
        _run(tmp_path, [paths[0], other])
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    with pytest.raises(LcflowError, match="do not exist"):
        _run(tmp_path, [paths[0], tmp_path / "missing.tif"])


def test_a_copy_of_one_year_s_probabilities_and_another_grid_are_refused_naming_what_differs(tmp_path):
    import shutil

    paths, truth, grid, classes = _series(tmp_path)
    copy = tmp_path / "p2019_copy.tif"
    shutil.copy(paths[0], copy)
    with pytest.raises(LcflowError, match=r"p2019_copy.tif \(2019\) is .* \(2018\) or a copy of it: each year"):
        _run(tmp_path, [paths[0], copy])
    from lcflow.common.raster import Grid

    shifted = Grid(grid.crs, grid.transform * rasterio.Affine.translation(64, 0), grid.width, grid.height)
    elsewhere = tmp_path / "elsewhere.tif"
    _write_probabilities(elsewhere, np.full((len(classes), 64, 64), 1 / len(classes)), shifted, classes)
    with pytest.raises(LcflowError) as refused:
        _run(tmp_path, [paths[0], elsewhere])
    said = str(refused.value)
    assert "are not on one grid (64 x 64 px of " in said and "classes" not in said, said
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_the_change_figure_shows_the_map_and_matrix_of_its_pair(tmp_path):
    from lcflow.maps import quicklook

    paths, *_ = _series(tmp_path)
    result, d = _run(tmp_path, paths, min_change_ha=0.05)
    quicklook.change_figure(d / "change.tif", d / "summary.json", tmp_path / "c.png", "31UFT test")
    with rasterio.open(tmp_path / "c.png") as png:
        assert png.width >= 900 and png.count >= 3
        assert len(np.unique(png.read(1))) > 10  # a picture, not a blank page
    other = json.loads((d / "summary.json").read_text())
    other["pairs"][0]["years"] = [2019, 2020]
    (tmp_path / "other.json").write_text(json.dumps(other))
    with pytest.raises(LcflowError, match=r"has no pair of years \[2018, 2019\]"):
        quicklook.change_figure(d / "change.tif", tmp_path / "other.json", tmp_path / "d.png", "x")
    assert not (tmp_path / "d.png").exists()


def test_a_single_year_series_is_that_year_s_map(tmp_path):
    paths, truth, grid, classes = _series(tmp_path)
    d = tmp_path / "single"
    result = consistent_maps.run(paths[:1], [2018], consistent_maps.SeriesOutputs.of([d / "m.tif"], [d / "c.tif"], [],
                                                                                     d / "s.json"))
    assert result["pairs"] == []
    with rasterio.open(d / "m.tif") as m, rasterio.open(paths[0]) as p:
        proba = p.read()
        empty = proba[0] == PROBABILITY_NODATA
        assert np.array_equal(m.read(1)[~empty], np.asarray(classes)[proba.argmax(axis=0)][~empty])
        assert (m.read(1)[empty] == 255).all()


def test_class_codes_beyond_a_byte_make_uint16_maps(tmp_path):
    grid = Grid.from_bounds(32631, (640000, 5760000, 640320, 5760320), 10)
    classes = [300, 1000, 65000]
    proba = np.zeros((3, 32, 32))
    proba[2] = 0.9
    proba[:2] = 0.05
    empty = np.zeros((32, 32), bool)
    empty[0, 0] = True
    paths = [tmp_path / "a.tif", tmp_path / "b.tif"]
    other = np.stack([np.full((32, 32), 0.1), np.full((32, 32), 0.1), np.full((32, 32), 0.8)])
    for p, year in zip(paths, (proba, other)):  # the years' maps alike, their files not copies
        _write_probabilities(p, year, grid, classes, empty)
    _, d = _run(tmp_path, paths)
    with rasterio.open(d / "m18.tif") as m:
        codes = m.read(1)
        assert m.dtypes[0] == "uint16" and m.nodata == 65535
        assert m.colormap(1)[65000][:3] == (65000 % 256, 100, (200 - 65000) % 256)
        assert codes[0, 0] == 65535 and (codes.ravel()[1:] == 65000).all()


def test_a_change_map_gets_a_stac_item_in_a_catalog(tmp_path):
    import pystac
    import pystac.validation

    from lcflow.maps import stac_items as stac_products

    paths, *_ = _series(tmp_path)
    _, d = _run(tmp_path, paths, min_change_ha=0.05)
    item = stac_products.change_item(d / "change.tif", "31UFT", "test", d / "summary.json")
    stac_products.write_item(item, d / "change.stac.json", tmp_path / "stac" / "catalog.json")
    stac_products.write_catalog([d / "change.stac.json"], tmp_path / "stac" / "catalog.json", "test")
    catalog = pystac.Catalog.from_file(str(tmp_path / "stac" / "catalog.json"))
    [read] = list(catalog.get_items())
    pystac.validation.validate_dict(read.to_dict(), extensions=[])
    assert read.properties["start_datetime"].startswith("2018-01-01") and read.properties["end_datetime"].startswith("2019-12-31")
    assert read.properties["lcflow:changed_fraction"] == pytest.approx(120 / (64 * 64 - 16))
    asset = read.assets["change"]
    assert Path(asset.get_absolute_href()) == (d / "change.tif").resolve() and asset.href == "./change.tif"
    classes = {c["value"]: c for c in asset.extra_fields["classification:classes"]}
    assert classes[6]["description"] == "class 31 -> class 32" and classes[6]["name"] == "class_31_class_32"
    assert classes[6]["color_hint"] == "{:02X}{:02X}{:02X}".format(32, 100, 168)  # the colour of class 32
    assert read.properties["proj:code"] == "EPSG:32631" and read.properties["proj:shape"] == [64, 64]


def test_the_raw_maps_class_is_numpys_argmax_of_the_stored_levels_ties_included():
    from lcflow.maps.consistent import first_max

    levels = np.random.default_rng(4).choice(np.array([0, 3, 127, 254, 255], np.uint8), size=(3, 5000, 13))
    np.testing.assert_array_equal(first_max(levels), levels.argmax(axis=2))
