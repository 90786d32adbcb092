import json
import shutil
import threading
import warnings

import numpy as np
import pytest
import rasterio

from lcflow.assess import accuracy as assess
from lcflow.common.raster import Grid
from lcflow.errors import LcflowError
from lcflow.labels import nomenclature
from lcflow.maps import map_windows, predict
from lcflow.retrieve.cube_settings import CubeSettings
from lcflow.train import training


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


def test_a_map_s_classes_are_named_where_gdal_and_qgis_look(stages, rf_model, tmp_path):
    """Beside the map, GDAL's auxiliary file gives the band its category names (gdalinfo lists them) and a
    QGIS style of the same name gives each class its name and the map's colour."""
    import shutil
    import subprocess
    import xml.etree.ElementTree as ET

    from ..conftest import missing

    predict.run(rf_model, stages["cube2018"], tmp_path / "map.tif", tmp_path / "conf.tif", block=64)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["conf.tif", "map.qml", "map.tif", "map.tif.aux.xml"]
    with rasterio.open(tmp_path / "map.tif") as m:
        cmap, names = m.colormap(1), {int(k): v for k, v in json.loads(m.tags()["class_names"]).items()}
    palette = ET.parse(tmp_path / "map.qml").getroot().findall(".//paletteEntry")
    assert {int(e.get("value")): e.get("label") for e in palette} == {c: f"{c} {n}" for c, n in names.items()}
    for e in palette:
        assert e.get("color") == "#{:02x}{:02x}{:02x}".format(*cmap[int(e.get("value"))][:3])
    if shutil.which("gdalinfo") is None:
        missing("gdal", "gdal-bin is not installed (its gdalinfo reads the categories as a user would)")
    info = subprocess.run(["gdalinfo", str(tmp_path / "map.tif")], capture_output=True, text=True, timeout=60).stdout
    categories = info.split("Categories:", 1)[1]
    for code, name in names.items():
        assert f"{code}: {name}" in categories, info[-2000:]
    assert "31: Forests" in categories


def test_windowed_prediction_equals_one_window(stages, rf_model, tmp_path):
    predict.run(rf_model, stages["cube2018"], tmp_path / "a.tif", tmp_path / "ac.tif", block=32)
    predict.run(rf_model, stages["cube2018"], tmp_path / "b.tif", tmp_path / "bc.tif", block=1024)
    with rasterio.open(tmp_path / "a.tif") as a, rasterio.open(tmp_path / "b.tif") as b:
        assert np.array_equal(a.read(), b.read())


def test_the_forest_maps_the_same_with_its_trees_as_tensors(stages, rf_model, tmp_path):
    """predict_engine: tensors (a GPU node's engine, here on torch's CPU) gives the map, confidence and
    probabilities of the compiled traversal, pixel for pixel."""
    import shutil

    tensors = tmp_path / "rf_tensors"
    shutil.copytree(rf_model, tensors)
    meta = json.loads((tensors / "model.json").read_text())
    meta["params"]["predict_engine"] = "tensors"
    (tensors / "model.json").write_text(json.dumps(meta))
    for name, model in (("compiled", rf_model), ("tensors", tensors)):
        predict.run(model, stages["cube2018"], tmp_path / f"{name}.tif", tmp_path / f"{name}_conf.tif", block=48,
                    out_probabilities=tmp_path / f"{name}_proba.tif")
    for suffix in ("", "_conf", "_proba"):
        with rasterio.open(tmp_path / f"compiled{suffix}.tif") as a, rasterio.open(tmp_path / f"tensors{suffix}.tif") as b:
            assert np.array_equal(a.read(), b.read()), suffix


def test_assess_against_truth_and_samples(stages, rf_model, demo, tmp_path):
    predict.run(rf_model, stages["cube2018"], tmp_path / "map.tif", tmp_path / "conf.tif")
    r = assess.run(rf_model, stages["samples2018"], tmp_path / "map.tif",
                   assess.AssessmentOutputs.of(tmp_path / "a.json", figure=tmp_path / "a.png"),
                   truth=demo / "truth" / "31UFT_2018.tif", nomenclature=nomenclature.clc_level(2))
    assert r["truth"]["overall_accuracy"] > 0.6  # small area, few samples: the demo-size bar is in test_workflow
    assert r["test_samples"]["n_samples"] > 0
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    # the truth itself scores perfectly: the comparison is pixel-exact
    perfect = assess.against_truth(demo / "truth" / "31UFT_2018.tif", demo / "truth" / "31UFT_2018.tif", nomenclature.clc_level(3))
    assert perfect["overall_accuracy"] == 1.0 and perfect["kappa"] == 1.0
    text = assess.summarize([tmp_path / "a.json"], tmp_path / "acc.tsv")
    assert text.splitlines()[1].startswith("a\trf\t") and (tmp_path / "acc.tsv").read_text() == text


def test_predict_refuses_a_cube_that_does_not_fit(stages, rf_model, tmp_path):
    from lcflow.retrieve import cube

    cube.run(stages["items2018"], "31UFT", 2018, tmp_path / "c.tif", tmp_path / "v.tif",
             CubeSettings(bands=["B04", "B08"], time_steps=6), bounds=[640000, 5760000, 640640, 5760640])
    with pytest.raises(LcflowError, match="does not fit model"):
        predict.run(rf_model, tmp_path / "c.tif", tmp_path / "m.tif", tmp_path / "mc.tif")
    assert not (tmp_path / "m.tif").exists() and not (tmp_path / "mc.tif").exists()


def test_probabilities_are_the_map_s_evidence_and_a_nodata_hole_stays_nodata(stages, rf_model, tmp_path):
    """Class probabilities beside the map: one band a class, argmax = the map; a hole in the cube (no
    observation at any date) is nodata in all three outputs, and nothing around it is."""
    from lcflow.retrieve.composite import NODATA

    holed = tmp_path / "holed.tif"
    with rasterio.open(stages["cube2018"]) as src:
        profile, data, tags = src.profile, src.read(), src.tags()
    data[:, 30:50, 60:90] = NODATA
    with rasterio.open(holed, "w", **profile) as dst:
        dst.write(data)
        dst.update_tags(**tags)
    predict.run(rf_model, holed, tmp_path / "m.tif", tmp_path / "c.tif", block=32, out_probabilities=tmp_path / "p.tif")
    predict.run(rf_model, stages["cube2018"], tmp_path / "whole.tif", tmp_path / "wc.tif", block=32)
    with rasterio.open(tmp_path / "whole.tif") as w:
        unholed = w.read(1)
    with rasterio.open(tmp_path / "m.tif") as m, rasterio.open(tmp_path / "c.tif") as c, \
            rasterio.open(tmp_path / "p.tif") as p:
        classes = json.loads(p.tags()["class_codes"])
        codes, conf, proba = m.read(1), c.read(1), p.read()
        assert p.count == len(classes) and p.scales[0] == pytest.approx(1 / predict.PROBABILITY_SCALE)
    hole = np.zeros(codes.shape, bool)
    hole[30:50, 60:90] = True
    assert (codes[hole] == 255).all() and (conf[hole] == 255).all() and (proba[:, hole] == 255).all()
    assert np.array_equal(codes[~hole], unholed[~hole])  # pixel models: the hole changes nothing around it
    mapped = codes != 255
    assert mapped.mean() > 0.9 and (proba[:, mapped] != 255).all() and (proba[:, ~mapped] == 255).all()
    share = proba[:, mapped].astype(float) / predict.PROBABILITY_SCALE
    assert np.allclose(share.sum(axis=0), 1, atol=len(classes) / predict.PROBABILITY_SCALE)
    assert (np.asarray(classes)[share.argmax(axis=0)] != codes[mapped]).mean() < 0.002  # ties after rounding


def test_a_killed_prediction_leaves_no_finished_looking_file(stages, rf_model, tmp_path):
    """SIGKILL in the middle of the windows: no map, confidence or probabilities under their names;
    the rerun clears what the killed job left and publishes all three."""
    import os
    import subprocess
    import sys

    out = {k: tmp_path / f"{k}.tif" for k in ("map", "conf", "proba")}
    code = (
        "import os, signal, sys\n"
        "from lcflow.maps import predict\nfrom lcflow.train.model_dirs import model_dir as trained\n"
        "calls = []\n"
        "real = trained.TrainedModel.input_probabilities\n"
        "def dying(self, x):\n"
        "    calls.append(1)\n"
        "    if len(calls) == 3:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return real(self, x)\n"
        "trained.TrainedModel.input_probabilities = dying\n"
        "predict.run(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], block=32, out_probabilities=sys.argv[5])\n"
    )
    args = [str(rf_model), str(stages["cube2018"]), str(out["map"]), str(out["conf"]), str(out["proba"])]
    killed = subprocess.run([sys.executable, "-c", code, *args], env={**os.environ}, timeout=300)
    assert killed.returncode == -9
    assert not any(p.exists() for p in out.values())
    assert any(p.name.startswith(".") for p in tmp_path.iterdir())  # the killed job's staging files
    predict.run(*args[:4], block=32, out_probabilities=args[4])
    assert all(p.exists() for p in out.values())
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_ranks_share_the_windows_in_runs_that_differ_by_one_at_most():
    from lcflow.maps.predict import share

    for n in range(0, 40):
        for size in range(1, 9):
            runs = [share(n, rank, size) for rank in range(size)]
            assert [i for r in runs for i in r] == list(range(n)), (n, size)  # every window once, in order
            assert max(map(len, runs)) - min(map(len, runs)) <= 1, (n, size)


def test_several_preparing_threads_map_as_one_does(stages, rf_model, tmp_path, monkeypatch):
    """Windows read and prepared four at a time (as on a GPU) in threads of their own, each with its own
    dataset: the same files, to the byte, as one thread ahead of the model."""
    files = {n: [tmp_path / f"{n}_{k}.tif" for k in ("map", "conf", "proba")] for n in (1, 4)}
    predict.run(rf_model, stages["cube2018"], *files[1][:2], block=32, out_probabilities=files[1][2])
    monkeypatch.setattr(predict, "preparing_threads", lambda *a, **k: 4)
    seen = set()
    real = predict.TrainedModel.window_inputs

    def counting(self, x, latlon=None):
        seen.add(threading.current_thread().name)
        return real(self, x, latlon)

    monkeypatch.setattr(predict.TrainedModel, "window_inputs", counting)
    predict.run(rf_model, stages["cube2018"], *files[4][:2], block=32, out_probabilities=files[4][2])
    assert len(seen) > 1 and threading.current_thread().name not in seen
    for one, four in zip(files[1], files[4]):
        assert one.read_bytes() == four.read_bytes(), one.name


def test_a_window_that_cannot_be_prepared_is_named(stages, rf_model, tmp_path, monkeypatch):
    real = predict.TrainedModel.window_inputs
    calls = []

    def failing(self, x, latlon=None):
        calls.append(1)
        if len(calls) == 3:
            raise ValueError("corrupt block")
        return real(self, x, latlon)

    monkeypatch.setattr(predict.TrainedModel, "window_inputs", failing)
    with pytest.raises(RuntimeError, match=r"cube.tif: one process, window 2 \(rows 0\.\.31, cols 64\.\.95\) failed: "
                                           r"ValueError: corrupt block"):
        predict.run(rf_model, stages["cube2018"], tmp_path / "m.tif", tmp_path / "c.tif", block=32)
    assert not (tmp_path / "m.tif").exists()


def test_threads_that_prepare_windows_follow_the_device_cores_and_memory():
    assert predict.preparing_threads(False, 512 * 512, 12, 10, cpus=48) == 1  # the CPU model takes the cores
    assert predict.preparing_threads(True, 256 * 256, 12, 10, cpus=12) == 8
    assert predict.preparing_threads(True, 256 * 256, 12, 10, cpus=3) == 3
    # a 4096 px window of 12 x 10 values: 11 GB prepared, so one at a time
    assert predict.preparing_threads(True, 4096 * 4096, 12, 10, cpus=12) == 1
    assert predict.preparing_threads(True, 1024 * 1024, 12, 10, cpus=12) == 2  # 0.8 GB each


def test_a_cube_block_becomes_features_in_the_models_band_order_with_gaps_as_nan():
    """A cube block holds its bands step after step (step t, band b at t * bands + b); the model takes its
    own bands, in its own order, for each pixel in row-major order (as the map is written), with the
    cube's nodata as NaN. Checked against the layout spelt out value by value."""
    from lcflow.retrieve.composite import NODATA

    cube_bands, steps, rows, cols = ["B02", "B03", "B04", "B08"], 3, 2, 5
    block = np.zeros((steps * len(cube_bands), rows, cols), dtype=np.int16)
    for t in range(steps):
        for b in range(len(cube_bands)):
            for r in range(rows):
                for c in range(cols):
                    block[t * len(cube_bands) + b, r, c] = 1000 * t + 100 * b + 10 * r + c
    block[1 * len(cube_bands) + 2, 1, 3] = NODATA  # B04 at step 1, pixel (1, 3)
    bands = ["B08", "B04"]
    x = map_windows.cube_features(block, steps, bands, cube_bands)
    assert x.shape == (rows * cols, steps, len(bands))
    for r in range(rows):
        for c in range(cols):
            for t in range(steps):
                for k, band in enumerate(bands):
                    got = x[r * cols + c, t, k]
                    if (t, band, r, c) == (1, "B04", 1, 3):
                        assert np.isnan(got)
                    else:
                        assert got == 1000 * t + 100 * cube_bands.index(band) + 10 * r + c
    assert np.isnan(x).sum() == 1


@pytest.mark.parametrize("class_weight", ["balanced", "none"])
def test_weight_correction_decides_the_map_by_the_corrected_probabilities(stages, class_weight, tmp_path):
    """weight_correction reaches the map: the same network read with its loss's class weights divided out
    writes the corrected probabilities and maps their argmax. With class_weight none the loss's weights
    are ones, recorded as such, and the correction changes nothing."""
    plain = tmp_path / "plain"
    training.train("tempcnn", [str(stages["samples2018"])], plain,
                   {"epochs": 8, "min_steps": 0, "filters": 16, "dense": 32, "class_weight": class_weight})
    corrected = tmp_path / "corrected"
    shutil.copytree(plain, corrected)
    meta = json.loads((corrected / "model.json").read_text())
    meta["params"]["weight_correction"] = 1.0
    (corrected / "model.json").write_text(json.dumps(meta))
    out = {}
    for name, model in (("plain", plain), ("corrected", corrected)):
        predict.run(model, stages["cube2018"], tmp_path / f"{name}.tif", tmp_path / f"{name}_c.tif", block=64,
                    out_probabilities=tmp_path / f"{name}_p.tif")
        with rasterio.open(tmp_path / f"{name}.tif") as m, rasterio.open(tmp_path / f"{name}_p.tif") as p:
            out[name] = m.read(1), p.read().astype(float) / predict.PROBABILITY_SCALE, json.loads(p.tags()["class_codes"])
    (map_a, proba_a, classes), (map_b, proba_b, _) = out["plain"], out["corrected"]
    weights = np.asarray(meta["loss_class_weights"])
    mapped = map_a != 255
    if class_weight == "none":
        assert np.array_equal(weights, np.ones(len(classes)))
        assert np.array_equal(map_a, map_b) and np.array_equal(proba_a, proba_b)
        return
    assert weights.max() / weights.min() > 1.3  # the sample is not balanced: the correction has work to do
    expected = proba_a[:, mapped] / weights[:, None]
    expected /= expected.sum(axis=0)
    tolerance = 2 * len(classes) / predict.PROBABILITY_SCALE / weights.min()  # both sides rounded to bytes
    assert np.abs(proba_b[:, mapped] - expected).max() < tolerance
    # where the corrected probabilities' top two are further apart than rounding can move them, the map
    # takes the corrected top class (the plain map, where it differs, does not)
    top_two = np.sort(expected, axis=0)[-2:]
    clear = top_two[1] - top_two[0] > tolerance
    decided = np.asarray(classes)[expected.argmax(axis=0)]
    assert clear.mean() > 0.5 and np.array_equal(map_b[mapped][clear], decided[clear])
    assert (map_a[mapped][clear] != decided[clear]).sum() >= 50
    assert (map_a != map_b).mean() > 0.01  # the correction moved some pixels to other classes (3 % here)


def _design(map_path, out, label=None):
    """The design lcflow design-sample draws from ``map_path``; ``label(points)`` fills its reference column."""
    import geopandas as gpd

    from lcflow.assess import design as sample_design

    points = sample_design.draw(map_path, sample_design.Design(target_se=0.05, min_per_class=20))
    sample_design.write(points, map_path, out, None)
    if label is not None:
        frame = gpd.read_file(out, layer=sample_design.LAYER)
        frame["reference"] = label(frame)
        frame.to_file(out, layer=sample_design.LAYER)
    return out


def test_an_unlabelled_reference_gives_no_accuracy_anywhere(stages, rf_model, tmp_path, caplog):
    """The design as drawn, its reference column empty: assess warns naming the file and why, and the
    assessment, the accuracy table, its quote and the figures say "not enough evidence", never "OA nan"."""
    from lcflow.cli import main

    predict.run(rf_model, stages["cube2018"], tmp_path / "map.tif", tmp_path / "conf.tif")
    design = _design(tmp_path / "map.tif", tmp_path / "design.gpkg")
    with caplog.at_level("WARNING", logger="lcflow"):
        code = main(["assess", "--model-dir", str(rf_model), "--samples", str(stages["samples2018"]), "--map",
                     str(tmp_path / "map.tif"), "--reference", str(design), "--out", str(tmp_path / "a.json"),
                     "--figure", str(tmp_path / "a.png"), "--areas-figure", str(tmp_path / "areas.png")])
    assert code == 0
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(w.startswith(f"reference file {design}: not enough evidence for an accuracy figure: none of its ")
               and "has a label in column 'reference'" in w for w in warned), warned
    ref = json.loads((tmp_path / "a.json").read_text())["reference"]
    assert "overall_accuracy" not in ref and ref["points_used"] == 0 and ref["points_unlabelled"] == ref["points"] > 0
    text = assess.summarize([tmp_path / "a.json"], tmp_path / "acc.tsv")
    row = dict(zip(*(line.split("\t") for line in text.splitlines())))
    assert row["reference_OA"] == row["reference_OA_ci95"] == ""
    assert row["quote"].startswith(f"none: not enough evidence in reference {design}: none of its")
    assert "nan" not in text.lower()


def test_few_test_rows_of_one_class_are_not_scored(stages, rf_model, tmp_path, caplog):
    """lcflow evaluate on 6 test rows of one class: a WARNING naming the table and the rule, no figures."""
    import pandas as pd

    from lcflow.cli import main

    frame = pd.read_parquet(stages["samples2018"])
    test = frame[frame["split"] == "test"]
    six = test[test["label"] == test["label"].iloc[0]].iloc[:6]
    pd.concat([frame[frame["split"] != "test"], six]).to_parquet(tmp_path / "six.parquet")
    with caplog.at_level("WARNING"), warnings.catch_warnings():
        warnings.simplefilter("error")  # no library's raw warnings (sklearn's on one class)
        assert main(["evaluate", "--model-dir", str(rf_model), "--samples", str(tmp_path / "six.parquet"), "--out",
                     str(tmp_path / "m.json")]) == 0
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [f"the test rows of {tmp_path}/six.parquet: not enough evidence for an accuracy figure: 6 rows, "
                      "of 1 class; an accuracy needs at least 50 points of at least 2 classes (Congalton & Green "
                      "2019: 50 samples the least per map class; with one class kappa and class accuracies are "
                      "undefined)"]
    result = json.loads((tmp_path / "m.json").read_text())
    assert "overall_accuracy" not in result and "kappa" not in result and result["n_samples"] == 6


def test_a_reference_class_the_map_never_predicts_is_an_omission_error(stages, rf_model, tmp_path, capsys):
    """lcflow assess with the workflow's nomenclature: reference points of a class of it that the map has
    no pixel of (52, marine waters) are rows of the error matrix, omitted by the map, not a refusal."""
    from lcflow.cli import main

    predict.run(rf_model, stages["cube2018"], tmp_path / "map.tif", tmp_path / "conf.tif")
    with rasterio.open(tmp_path / "map.tif") as ds:
        assert 52 not in np.unique(ds.read(1))
    design = _design(tmp_path / "map.tif", tmp_path / "design.gpkg",
                     label=lambda f: np.where(np.arange(len(f)) % 10 == 0, 52, f["stratum"]))
    assert main(["assess", "--model-dir", str(rf_model), "--samples", str(stages["samples2018"]), "--map",
                 str(tmp_path / "map.tif"), "--reference", str(design), "--level", "2",
                 "--out", str(tmp_path / "a.json")]) == 0, capsys.readouterr().err
    ref = json.loads((tmp_path / "a.json").read_text())["reference"]
    assert "classes" in ref, ref
    k = ref["classes"].index(52)
    assert ref["producers_accuracy"][k] == 0 and ref["mapped_area_ha"][k] == 0 and ref["area_ha"][k] > 0
    assert ref["class_names"][k] == "Marine waters"
    assert ref["overall_accuracy"] < 0.95  # every tenth point an omission


class _AloneOfTwo:
    """Rank 0 of a job of two whose partner maps nothing: the collectives return rank 0's own figures."""

    rank, size, local_rank, name = 0, 2, 0, "test"

    def allreduce_sum(self, values, name=""):
        return np.asarray(values)


def test_ranks_that_mapped_fewer_windows_than_the_map_has_publish_nothing(stages, rf_model, tmp_path, monkeypatch):
    """The ranks' count of mapped windows is checked against the map's before anything is published: a
    rank that mapped none of its share (without failing) ends the job naming the shortfall, and leaves
    no map and no staged window."""
    from lcflow.train.parallel import distributed

    monkeypatch.setattr(distributed, "connect", lambda backend: _AloneOfTwo())
    with pytest.raises(RuntimeError, match=r"predict \S+cube.tif: the ranks mapped 8 of 16 windows"):
        predict.run(rf_model, stages["cube2018"], tmp_path / "map.tif", tmp_path / "conf.tif", block=32)
    assert list(tmp_path.iterdir()) == []
