import copy
import datetime as dt

import numpy as np
import pytest
import rasterio
import yaml

from lcflow import config
from lcflow.common.raster import Bands, Grid, cog_writer
from lcflow.errors import LcflowError

from ..conftest import ROOT

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
DEMO = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_demo_config_is_valid():
    config.check(DEMO, SCHEMA, ROOT)


@pytest.mark.parametrize("change,message", [
    (lambda c: c.update(colour="red"), "unknown key 'colour' in (top level)"),
    (lambda c: c["sample"].update(per_klass=3), "unknown key 'per_klass' in sample"),
    (lambda c: c["tiles"].append("31UFTX"), "tiles[2] = '31UFTX' is not a valid MGRS tile id"),
    (lambda c: c["years"].append(2014), "years[2] = 2014"),
    (lambda c: c["years"].append(2031), "years[2] = 2031 is outside 2015..2030"),
    (lambda c: c["models"].append("svm"), f"models[{len(DEMO['models'])}] = 'svm' is not one of"),
    (lambda c: c["labels"].update(level=4), "labels.level = 4 is not one of"),
    (lambda c: c["aoi"].update({"99ZZZ": [0, 0, 1, 1]}), "aoi: key '99ZZZ' is not a valid MGRS tile id"),
    (lambda c: c["labels"].update(mapping="nope.csv"), "labels.mapping = 'nope.csv': file does not exist"),
    (lambda c: (c.pop("demo"), None), "stac.catalog = 'resources/demo/catalog/catalog.json': file does not exist"),
    (lambda c: c["stac"].update(api="https://x"), "stac: give exactly one"),
    (lambda c: c["models"].append("resnet"), "models includes resnet, which trains on patches: set sample.patch_px"),
    (lambda c: c["sample"].update(patch_px=10), "sample.patch_px = 10 must be odd"),
    (lambda c: c.setdefault("cube", {}).update(indices=["NDVI", "NDBI"], bands=["B04", "B08"]),
     "cube.indices[1]: index NDBI needs band(s) B11, which the cube's bands (B04, B08) do not include"),
    (lambda c: c.setdefault("cube", {}).update(indices=["NDXI"]), "cube.indices[0] = 'NDXI' is not one of"),
    (lambda c: c.setdefault("cube", {}).update(fill_gaps="spline"), "cube.fill_gaps = 'spline' is not one of"),
])
def test_bad_config_is_named_in_one_line(change, message, tmp_path):
    cfg = copy.deepcopy(DEMO)
    change(cfg)
    with pytest.raises(LcflowError) as err:
        config.check(cfg, SCHEMA, tmp_path, today=dt.date(2030, 6, 1))
    text = str(err.value)
    assert "\n" not in text and message in text, text


@pytest.mark.parametrize("order", ["rows", "z"])
def test_grid_windows_cover_the_grid_once(order):
    g = Grid.from_bounds(32631, (0, 0, 1000, 700), 10)
    cover = np.zeros((g.height, g.width), int)
    for w in g.windows(32, order):
        cover[w.toslices()] += 1
    assert (cover == 1).all()
    assert g.bounds == (0, 0, 1000, 700)


def test_z_ordered_windows_of_one_source_tile_follow_each_other():
    """512 px windows over 1024 px tiles (a 10 m band) and 2048 px ones (a 20 m band tiled 1024 px):
    each tile's windows come one after another, without windows of other tiles between them."""
    g = Grid.from_bounds(32631, (0, 0, 109800, 109800), 10)  # a whole tile: windows not a power of two
    windows = list(g.windows(512, "z"))
    assert len(windows) == 22 * 22 and windows[0].col_off == windows[0].row_off == 0
    for tile in (1024, 2048):
        seen = [(int(w.row_off) // tile, int(w.col_off) // tile) for w in windows]
        runs = [k for i, k in enumerate(seen) if i == 0 or seen[i - 1] != k]
        assert len(runs) == len(set(seen)), tile  # no tile is come back to
    assert [(w.row_off, w.col_off) for w in windows[:4]] == [(0, 0), (0, 512), (512, 0), (512, 512)]
    with pytest.raises(ValueError, match="spiral"):
        next(g.windows(512, "spiral"))


def test_a_failed_write_leaves_nothing(tmp_path):
    g = Grid.from_bounds(32631, (0, 0, 640, 640), 10)
    target = tmp_path / "out.tif"
    with pytest.raises(RuntimeError):
        with cog_writer(target, g, Bands(1, "uint8")) as dst:
            dst.write(np.ones((1, 32, 32), np.uint8), window=rasterio.windows.Window(0, 0, 32, 32))
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_keeps_the_previous_file_on_error(tmp_path):
    from lcflow.common.atomic import atomic_path, write_text

    target = tmp_path / "metrics.json"
    write_text(target, "old")
    with pytest.raises(ValueError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise ValueError("crash")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["metrics.json"]
