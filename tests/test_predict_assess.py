import json

import numpy as np
import pytest
import rasterio

from lcflow import assess, nomenclature, predict, training
from lcflow.errors import LcflowError
from lcflow.raster import Grid


@pytest.fixture(scope="module")
def rf_model(stages, tmp_path_factory):
    out = tmp_path_factory.mktemp("models") / "rf"
    training.train("rf", [str(stages["samples2018"]), str(stages["samples2019"])], out, {"n_estimators": 60})
    return out


def test_map_is_a_georeferenced_cog_with_classes_and_colours(stages, rf_model, tmp_path):
    predict.run(rf_model, stages["cube2018"], tmp_path / "map.tif", tmp_path / "conf.tif", block=48)
    with rasterio.open(tmp_path / "map.tif") as m, rasterio.open(tmp_path / "conf.tif") as c:
        assert Grid.of(tmp_path / "map.tif") == Grid.of(stages["cube2018"])
        assert m.tags(ns="IMAGE_STRUCTURE")["LAYOUT"] == "COG" and m.dtypes[0] == "uint8" and m.nodata == 255
        values = set(np.unique(m.read(1)).tolist()) - {255}
        assert values <= set(nomenclature.clc_level(2).codes) and len(values) >= 4
        cmap = m.colormap(1)
        for v in values:
            assert cmap[v][:3] == nomenclature.clc_level(2).colors[v]
        names = json.loads(m.tags()["class_names"])
        assert names["31"] == "Forests"
        conf = c.read(1)
        assert c.dtypes[0] == "uint8" and conf[conf != 255].max() <= 100 and conf[conf != 255].min() > 0


def test_windowed_prediction_equals_one_window(stages, rf_model, tmp_path):
    predict.run(rf_model, stages["cube2018"], tmp_path / "a.tif", tmp_path / "ac.tif", block=32)
    predict.run(rf_model, stages["cube2018"], tmp_path / "b.tif", tmp_path / "bc.tif", block=1024)
    with rasterio.open(tmp_path / "a.tif") as a, rasterio.open(tmp_path / "b.tif") as b:
        assert np.array_equal(a.read(), b.read())


def test_assess_against_truth_and_samples(stages, rf_model, demo, tmp_path):
    predict.run(rf_model, stages["cube2018"], tmp_path / "map.tif", tmp_path / "conf.tif")
    r = assess.run(rf_model, stages["samples2018"], tmp_path / "map.tif", tmp_path / "a.json",
                   truth=demo / "truth" / "31UFT_2018.tif", nomenclature=nomenclature.clc_level(2),
                   figure=tmp_path / "a.png")
    assert r["truth"]["overall_accuracy"] > 0.6  # small area, few samples: the demo-size bar is in test_workflow
    assert r["test_samples"]["n_samples"] > 0
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    # the truth itself scores perfectly: the comparison is pixel-exact
    perfect = assess.against_truth(demo / "truth" / "31UFT_2018.tif", demo / "truth" / "31UFT_2018.tif", nomenclature.clc_level(3))
    assert perfect["overall_accuracy"] == 1.0 and perfect["kappa"] == 1.0
    text = assess.summarize([tmp_path / "a.json"], tmp_path / "acc.tsv")
    assert text.splitlines()[1].startswith("a\trf\t") and (tmp_path / "acc.tsv").read_text() == text


def test_predict_refuses_a_cube_that_does_not_fit(stages, rf_model, tmp_path):
    from lcflow import cube

    cube.run(stages["items2018"], "31UFT", 2018, tmp_path / "c.tif", tmp_path / "v.tif", bands=["B04", "B08"],
             bounds=[640000, 5760000, 640640, 5760640], steps=6)
    with pytest.raises(LcflowError, match="does not fit model"):
        predict.run(rf_model, tmp_path / "c.tif", tmp_path / "m.tif", tmp_path / "mc.tif")
    assert not (tmp_path / "m.tif").exists() and not (tmp_path / "mc.tif").exists()
