"""The patch variant of the samples table and the resnet model that trains on it."""

from pathlib import Path

import numpy as np
import pytest
import rasterio
from sklearn.metrics import cohen_kappa_score

from lcflow.errors import LcflowError
from lcflow.labels import samples_table as samples
from lcflow.labels import sampling
from lcflow.labels.sample_settings import SampleSettings
from lcflow.maps import predict
from lcflow.retrieve.composite import NODATA
from lcflow.train import training
from lcflow.train.model_dirs import saved_models
from lcflow.train.model_dirs.model_dir import TrainedModel

from ..conftest import built_once


def test_patch_centres_are_the_samples_own_values(patch_samples, stages):
    table = samples.read(patch_samples[2018])
    plain = samples.read(stages["samples2018"])
    assert table.patch_size == 11 and len(table.frame) == len(plain.frame)
    patches = table.patches()
    assert patches.shape == (len(table.frame), table.steps, len(table.bands), 11, 11)
    np.testing.assert_array_equal(patches[..., 5, 5], table.features())
    # and they are the cube's pixels around the sample
    with rasterio.open(stages["cube2018"]) as ds:
        cube = ds.read()
    i = int(np.argmax((table.frame["row"] > 5) & (table.frame["col"] > 5)))
    r, c = int(table.frame["row"][i]), int(table.frame["col"][i])
    window = cube[:, r - 5:r + 6, c - 5:c + 6].astype(np.float32)
    window[window == NODATA] = np.nan
    np.testing.assert_array_equal(patches[i].reshape(window.shape), window)


def test_patches_beyond_the_tile_edge_are_missing(stages, tmp_path):
    path = tmp_path / "edge.parquet"
    sampling.run(stages["cube2018"], stages["valid2018"], stages["labels"], path, SampleSettings(
        per_class=100_000, min_valid_fraction=0.4, boundary_px=0, block_px=16, patch_px=5, min_per_class=0,
        clean={"min_label_probability": 0}), tile="31UFT", year=2018)
    table = samples.read(path)
    patches = table.patches()
    top = int(table.frame["row"].min())
    assert top < 2  # patches of 5 px around samples of this row reach beyond the tile
    at_top = (table.frame["row"] == top).to_numpy()
    assert np.isnan(patches[at_top][..., : 2 - top, :]).all() and not np.isnan(patches[at_top][..., 2, 2]).all()


def test_even_patch_size_is_refused(stages, tmp_path):
    with pytest.raises(LcflowError, match="patch_px 4"):
        sampling.run(stages["cube2018"], stages["valid2018"], stages["labels"], tmp_path / "x.parquet",
                     SampleSettings(patch_px=4, clean={"min_label_probability": 0}), tile="31UFT", year=2018)
    assert not (tmp_path / "x.parquet").exists()


def test_tables_with_and_without_patches_do_not_mix(patch_samples, stages):
    with pytest.raises(LcflowError, match="mix patch layouts"):
        samples.read([patch_samples[2018], stages["samples2019"]])


def test_patch_table_round_trips_through_pandas(patch_samples, tmp_path):
    table = samples.read(patch_samples[2018])
    copy = tmp_path / "copy.parquet"
    samples.write(table.frame, copy, table.meta)
    again = samples.read(copy)
    np.testing.assert_array_equal(again.patches(), table.patches())


def test_a_patch_column_without_its_layout_is_refused(patch_samples, tmp_path):
    table = samples.read(patch_samples[2018])
    bad = tmp_path / "bad.parquet"
    samples.write(table.frame, bad, {k: v for k, v in table.meta.items() if k != "patch"})
    with pytest.raises(LcflowError, match=f"{bad}: a 'patch' column needs"):
        samples.read(bad)


def test_resnet_without_patches_says_what_to_set(stages, tmp_path):
    with pytest.raises(LcflowError, match="trains on patches.*sample.patch_px"):
        training.train("resnet", [str(stages["samples2018"])], tmp_path / "m", {"epochs": 1})


def test_resnet_refuses_patches_smaller_than_its_context(patch_samples, tmp_path):
    with pytest.raises(LcflowError, match="at least 15 px"):
        training.train("resnet", [str(patch_samples[2018])], tmp_path / "m", {"epochs": 1, "blocks": 3})


@pytest.fixture(scope="module")
def resnet(patch_samples, tmp_path_factory):
    """The patch ResNet trained on both years, once per session (its tests run on several workers)."""
    def build(directory: Path) -> tuple[Path, dict]:
        out = directory / "resnet"
        return out, training.train("resnet", [str(patch_samples[2018]), str(patch_samples[2019])], out,
                                   {"epochs": 8, "min_steps": 0, "channels": 32, "threads": 2})

    return built_once(tmp_path_factory, "resnet", build)


def test_resnet_beats_the_majority_class_on_demo_samples(resnet):
    test = resnet[1]["test"]
    majority = max(c["support"] for c in test["per_class"].values()) / test["n_samples"]
    assert test["overall_accuracy"] > majority + 0.15 and test["kappa"] > 0.5, (test, majority)


def test_resnet_map_equals_classifying_each_patch(resnet, patch_samples, stages, tmp_path):
    """One fully-convolutional pass per window gives each pixel the class of the patch around it."""
    out_map, out_conf = tmp_path / "map.tif", tmp_path / "conf.tif"
    predict.run(resnet[0], stages["cube2018"], out_map, out_conf, block=48)  # windows not aligned to anything
    table = samples.read(patch_samples[2018])
    codes, confidence, empty = TrainedModel.load(resnet[0]).predict(table.patches())
    with rasterio.open(out_map) as m, rasterio.open(out_conf) as c:
        mapped, conf = m.read(1), c.read(1)
    rows, cols = table.frame["row"].to_numpy(), table.frame["col"].to_numpy()
    assert not empty.any()
    np.testing.assert_array_equal(mapped[rows, cols], codes)
    assert np.abs(conf[rows, cols].astype(int) - np.round(confidence * 100)).max() <= 1


def test_evaluate_scores_a_patch_model_on_its_table(resnet, patch_samples, stages, tmp_path):
    """evaluate's scores are those of the model's own maps at the test samples, counted here."""
    result = saved_models.evaluate(resnet[0], [str(patch_samples[2018]), str(patch_samples[2019])], tmp_path / "e.json")
    truth, mapped = [], []
    for year in (2018, 2019):
        out_map = tmp_path / f"map{year}.tif"
        predict.run(resnet[0], stages[f"cube{year}"], out_map, tmp_path / f"conf{year}.tif", block=64)
        frame = samples.read(patch_samples[year]).frame
        test = frame[frame["split"] == "test"]
        with rasterio.open(out_map) as m:
            truth += test["label"].tolist()
            mapped += m.read(1)[test["row"].to_numpy(), test["col"].to_numpy()].tolist()
    assert result["split"] == "test" and result["n_samples"] == len(truth) > 100
    assert result["overall_accuracy"] == pytest.approx(np.mean(np.array(truth) == np.array(mapped)))
    assert result["kappa"] == pytest.approx(cohen_kappa_score(truth, mapped))
