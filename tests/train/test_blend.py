"""A blend of a forest and TempCNN: the mean of their probabilities on samples and on a cube, its map made
from the members' stored probabilities, and what it refuses."""

import json
import shutil

import numpy as np
import pytest
import rasterio

from lcflow.common.raster import Grid
from lcflow.errors import LcflowError
from lcflow.labels import samples_table
from lcflow.maps import blend_maps, predict
from lcflow.train import training
from lcflow.train.model_dirs import blend, saved_models
from lcflow.train.model_dirs.evaluation import evaluate_table
from lcflow.train.model_dirs.model_dir import TrainedModel

CNN = {"min_steps": 60, "threads": 1, "evaluations": 3, "filters": 16, "dense": 32}


@pytest.fixture(scope="module")
def members(stages, tmp_path_factory):
    models = tmp_path_factory.mktemp("blend_members")
    samples = [str(stages["samples2018"]), str(stages["samples2019"])]
    training.train("rf", samples, models / "rf", {"n_estimators": 40})
    training.train("tempcnn", samples, models / "tempcnn", CNN)
    blend.make([models / "rf", models / "tempcnn"], models / "blend", samples)
    return models


@pytest.fixture(scope="module")
def member_maps(stages, members, tmp_path_factory):
    """Each member's map of the 2018 cube, with its probabilities and timing, as the workflow's predict
    writes them."""
    out = tmp_path_factory.mktemp("blend_maps")
    for m in ("rf", "tempcnn"):
        predict.run(members / m, stages["cube2018"], out / f"{m}.tif", out / f"{m}_conf.tif", block=48,
                    out_probabilities=out / f"{m}_p.tif", out_timing=out / f"{m}_timing.json")
    return out


def test_a_blend_is_the_mean_of_its_members_and_is_scored_as_one_model(stages, members):
    trained = saved_models.load(members / "blend")
    rf, cnn = saved_models.load(members / "rf"), saved_models.load(members / "tempcnn")
    assert isinstance(trained, blend.BlendedModel) and trained.model.name == "blend"
    with pytest.raises(LcflowError, match="is a blend of models"):  # a loader of single models says what reads it
        TrainedModel.load(members / "blend")
    assert trained.classes == rf.classes == cnn.classes
    test = samples_table.read([stages["samples2018"], stages["samples2019"]]).split("test")
    x = test.features(trained.bands, trained.steps)
    proba, empty = trained.probabilities(x)
    expected = (rf.probabilities(x)[0] + cnn.probabilities(x)[0]) / 2
    assert np.allclose(proba, expected, atol=1e-6) and not np.allclose(proba, rf.probabilities(x)[0], atol=0.01)
    assert np.allclose(proba.sum(axis=1)[~empty], 1, atol=1e-5)
    metrics = json.loads((members / "blend" / "metrics.json").read_text())
    assert metrics["members"] == ["rf", "tempcnn"]
    assert metrics["test"]["overall_accuracy"] == evaluate_table(trained, test)["overall_accuracy"] > 0.5
    assert metrics["val"]["n_samples"] > 0
    seconds = [json.loads((members / m / "metrics.json").read_text())["train_seconds"] for m in ("rf", "tempcnn")]
    assert metrics["train_seconds"] == pytest.approx(sum(seconds))
    listed = json.loads((members / "blend" / "members.json").read_text())["members"]
    assert [m["dir"] for m in listed] == ["../rf", "../tempcnn"]  # relative: the results move as a whole


def test_the_blend_map_from_stored_probabilities_is_the_exact_blend_within_their_rounding(stages, members,
                                                                                          member_maps, tmp_path):
    d = member_maps
    blend_maps.run(members / "blend", [d / "tempcnn_p.tif", d / "rf_p.tif"], tmp_path / "b.tif", tmp_path / "bc.tif",
                   out_probabilities=tmp_path / "bp.tif", member_timings=[d / "rf_timing.json", d / "tempcnn_timing.json"],
                   out_timing=tmp_path / "bt.json", block=40)
    # the same blend mapping the cube itself (both members run again): the exact mean
    predict.run(members / "blend", stages["cube2018"], tmp_path / "e.tif", tmp_path / "ec.tif", block=48,
                out_probabilities=tmp_path / "ep.tif")
    with rasterio.open(tmp_path / "b.tif") as b, rasterio.open(tmp_path / "e.tif") as e, \
            rasterio.open(tmp_path / "bp.tif") as bp, rasterio.open(tmp_path / "ep.tif") as ep:
        assert Grid.of(tmp_path / "b.tif") == Grid.of(stages["cube2018"])
        assert b.tags(ns="IMAGE_STRUCTURE")["LAYOUT"] == "COG" and b.tags()["model"] == "blend"
        assert json.loads(bp.tags()["class_codes"]) == saved_models.load(members / "blend").classes
        blended, exact = b.read(1), e.read(1)
        stored, exact_p = bp.read().astype(int), ep.read().astype(float)
    assert np.abs(stored - exact_p).max() <= 1  # a storage step: the members' rounding, averaged, then the blend's
    top2 = np.sort(exact_p, axis=0)[-2:]
    close = (top2[1] - top2[0]) <= 1  # classes whose exact means are within a storage step may swap
    assert np.array_equal(blended[~close], exact[~close]) and (blended != exact).mean() < 0.01
    with rasterio.open(d / "rf.tif") as rf_map, rasterio.open(d / "tempcnn.tif") as cnn_map:
        rf_codes, cnn_codes = rf_map.read(1), cnn_map.read(1)
    differ = rf_codes != cnn_codes
    assert differ.any() and np.isin(blended[differ], [rf_codes[differ], cnn_codes[differ]]).all()
    timing = json.loads((tmp_path / "bt.json").read_text())
    members_s = sum(json.loads((d / f"{m}_timing.json").read_text())["seconds"] for m in ("rf", "tempcnn"))
    assert timing["model"] == "blend" and timing["members_seconds"] == pytest.approx(members_s, abs=1e-5)
    assert timing["seconds"] == pytest.approx(members_s + timing["blend_seconds"], abs=1e-5)
    assert timing["px_per_s"] < min(json.loads((d / f"{m}_timing.json").read_text())["px_per_s"] for m in ("rf", "tempcnn"))


def test_a_member_without_data_leaves_the_blend_without_data(members, member_maps, tmp_path):
    hole = tmp_path / "rf_p.tif"
    shutil.copy(member_maps / "rf_p.tif", hole)
    with rasterio.open(hole, "r+") as dst:
        data = dst.read()
        data[:, 10:20, 30:50] = predict.PROBABILITY_NODATA
        dst.write(data)
    blend_maps.run(members / "blend", [hole, member_maps / "tempcnn_p.tif"], tmp_path / "b.tif", tmp_path / "bc.tif",
                   block=16)
    with rasterio.open(tmp_path / "b.tif") as b, rasterio.open(tmp_path / "bc.tif") as c:
        codes, confidence, nodata = b.read(1), c.read(1), b.nodata
    assert (codes[10:20, 30:50] == nodata).all() and (confidence[10:20, 30:50] == 255).all()
    assert (codes != nodata).sum() == codes.size - 200


def test_a_blend_refuses_what_it_cannot_average(stages, members, tmp_path):
    samples = [str(stages["samples2018"])]
    with pytest.raises(LcflowError, match="needs two members or more"):
        blend.make([members / "rf"], tmp_path / "b", samples)
    with pytest.raises(LcflowError, match="named twice"):
        blend.make([members / "rf", members / "rf"], tmp_path / "b", samples)
    with pytest.raises(LcflowError, match="is itself a blend"):
        blend.make([members / "rf", members / "blend"], tmp_path / "b", samples)
    with pytest.raises(LcflowError, match="both rf models"):
        shutil.copytree(members / "rf", tmp_path / "rf2")
        blend.make([members / "rf", tmp_path / "rf2"], tmp_path / "b", samples)
    other = tmp_path / "rf_11_steps"
    shutil.copytree(members / "rf", other)
    meta = json.loads((other / "model.json").read_text())
    (other / "model.json").write_text(json.dumps({**meta, "steps": meta["steps"] - 1}))
    with pytest.raises(LcflowError, match=f"{other} differ in their steps"):
        blend.make([members / "tempcnn", other], tmp_path / "b", samples)
    assert not (tmp_path / "b").exists()  # refused before anything was written


def test_a_member_trained_again_after_the_blend_is_named(members, tmp_path):
    copy = tmp_path / "models"
    for m in ("rf", "tempcnn", "blend"):
        shutil.copytree(members / m, copy / m)
    assert saved_models.load(copy / "blend").classes  # a copy of the results still loads: the paths are relative
    meta = json.loads((copy / "tempcnn" / "model.json").read_text())
    (copy / "tempcnn" / "model.json").write_text(json.dumps(meta, indent=2))
    with pytest.raises(LcflowError, match=r"member .*tempcnn was trained again after the blend was made"):
        saved_models.load(copy / "blend")
    with pytest.raises(LcflowError, match="trained again"):
        blend_maps.run(copy / "blend", [], tmp_path / "b.tif", tmp_path / "c.tif")


def test_blend_maps_names_the_probabilities_that_do_not_fit(members, member_maps, tmp_path):
    d = member_maps
    with pytest.raises(LcflowError, match="no probabilities of member.s. tempcnn"):
        blend_maps.run(members / "blend", [d / "rf_p.tif"], tmp_path / "b.tif", tmp_path / "c.tif")
    with pytest.raises(LcflowError, match="both hold member rf's probabilities"):
        blend_maps.run(members / "blend", [d / "rf_p.tif", d / "rf_p.tif"], tmp_path / "b.tif", tmp_path / "c.tif")
    stranger = tmp_path / "lstm_p.tif"
    shutil.copy(d / "tempcnn_p.tif", stranger)
    with rasterio.open(stranger, "r+") as dst:
        dst.update_tags(model="lstm")
    with pytest.raises(LcflowError, match=f"{stranger} holds the probabilities of model 'lstm', not of a member"):
        blend_maps.run(members / "blend", [d / "rf_p.tif", stranger], tmp_path / "b.tif", tmp_path / "c.tif")
    with pytest.raises(LcflowError, match="timing file .* is of model 'rf': give each member's"):
        blend_maps.run(members / "blend", [d / "rf_p.tif", d / "tempcnn_p.tif"], tmp_path / "b.tif", tmp_path / "c.tif",
                       member_timings=[d / "rf_timing.json", d / "rf_timing.json"], out_timing=tmp_path / "t.json")
    assert not (tmp_path / "b.tif").exists() and not (tmp_path / "c.tif").exists()
