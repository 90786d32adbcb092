"""The model comparison page: every model's accuracy with intervals, per-class F1, training time and speed."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from lcflow.assess import compare_models, comparison
from lcflow.errors import LcflowError


def _model_dir(root: Path, model: str, seconds: float, ranks: int) -> Path:
    d = root / model
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({"model": model, "train_seconds": seconds, "world_size": ranks}))
    return d


def _reference(path: Path, model: str, oa: float, ci: float, users: list[float], producers: list[float]) -> Path:
    path.write_text(json.dumps({"model": model, "reference": {
        "classes": [21, 31], "class_names": ["Arable land", "Forests"], "overall_accuracy": oa,
        "overall_accuracy_ci95": ci, "users_accuracy": users, "producers_accuracy": producers}}))
    return path


def _test_only(path: Path, model: str, oa: float, n: int, f1: dict[str, float]) -> Path:
    path.write_text(json.dumps({"model": model, "test_samples": {
        "overall_accuracy": oa, "n_samples": n,
        "per_class": {c: {"name": f"class {c}", "f1": v} for c, v in f1.items()}}}))
    return path


@pytest.mark.parametrize("k,n", [(90, 100), (3, 3), (0, 20), (431, 447)])
def test_wilson_interval_is_scipy_s(k, n):
    low, high = comparison.wilson_interval(k / n, n)
    ref = scipy.stats.binomtest(k, n).proportion_ci(method="wilson")
    assert (low, high) == pytest.approx((ref.low, ref.high), abs=1e-12)


@pytest.fixture
def run(tmp_path):
    """Two models: rf with a reference-sampled map and a test-samples-only map, lstm with one reference map."""
    models = [_model_dir(tmp_path / "models", "rf", 8.0, 1), _model_dir(tmp_path / "models", "lstm", 26.4, 2)]
    a = tmp_path / "assessment"
    a.mkdir()
    files = [_reference(a / "T1_2018_rf.json", "rf", 0.90, 0.02, [0.9, 0.6], [0.8, 0.9]),
             _test_only(a / "T1_2019_rf.json", "rf", 0.75, 40, {"21": 0.5, "24": 0.4}),
             _reference(a / "T1_2018_lstm.json", "lstm", 0.95, 0.01, [1.0, 0.5], [0.5, 1.0])]
    timings = []
    for name, model, px in (("T1_2018_rf", "rf", 1000.0), ("T1_2019_rf", "rf", 3000.0), ("T1_2018_lstm", "lstm", 500.0)):
        timings.append(tmp_path / f"{name}_timing.json")
        timings[-1].write_text(json.dumps({"model": model, "px_per_s": px, "pixels": 100, "seconds": 100 / px}))
    return files, models, timings


def test_table_holds_each_model_s_accuracy_f1_time_and_speed(run, tmp_path):
    files, models, timings = run
    text = compare_models.write(files, models, timings, tmp_path / "cmp.tsv", tmp_path / "cmp.png")
    assert (tmp_path / "cmp.tsv").read_text() == text
    rows = {line.split("\t")[0]: dict(zip(text.splitlines()[0].split("\t"), line.split("\t")))
            for line in text.splitlines()[1:]}
    assert list(rows) == ["rf", "lstm"]  # the order the models were given
    rf, lstm = rows["rf"], rows["lstm"]
    assert rf["maps"] == "2" and rf["accuracy_from"] == "reference sample + test samples"
    assert float(rf["accuracy_mean"]) == pytest.approx((0.90 + 0.75) / 2, abs=1e-4)
    wilson_low = scipy.stats.binomtest(30, 40).proportion_ci(method="wilson").low
    assert float(rf["accuracy_low_min"]) == pytest.approx(wilson_low, abs=1e-4)  # the test-only map's interval
    assert float(rf["accuracy_high_max"]) == pytest.approx(0.92, abs=1e-4)
    # F1 of the reference map from user's and producer's accuracy, averaged with the test map's where both have it
    f1_21 = (2 * 0.9 * 0.8 / 1.7 + 0.5) / 2
    assert float(rf["f1_21"]) == pytest.approx(f1_21, abs=1e-4)
    assert float(rf["f1_31"]) == pytest.approx(2 * 0.6 * 0.9 / 1.5, abs=1e-4)
    assert float(rf["f1_24"]) == pytest.approx(0.4, abs=1e-4)
    assert lstm["f1_24"] == ""  # no map of the lstm has the class
    assert float(lstm["macro_f1"]) == pytest.approx(np.mean([2 * 0.5 / 1.5, 2 * 0.5 / 1.5]), abs=1e-4)
    assert (rf["train_s"], rf["train_ranks"], lstm["train_s"], lstm["train_ranks"]) == ("8.0", "1", "26.4", "2")
    assert (rf["predict_px_s"], lstm["predict_px_s"]) == ("2000", "500")
    assert (tmp_path / "cmp.png").read_bytes()[:4] == b"\x89PNG"
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging file left


def test_it_names_the_model_for_overall_accuracy_and_for_the_rare_classes(tmp_path):
    """forest: the higher accuracy on three maps; tempcnn 0.03 under it, inside the forest's interval over
    the maps, and better on the rare class; lstm under both and outside the forest's interval."""
    models = [_model_dir(tmp_path / "models", m, 1.0, 1) for m in ("rf", "tempcnn", "lstm")]
    a = tmp_path / "assessment"
    a.mkdir()
    per_map = {"rf": ([0.80, 0.82, 0.84], 0.40), "tempcnn": ([0.78, 0.79, 0.80], 0.70), "lstm": ([0.60, 0.62, 0.64], 0.50)}
    files = [_test_only(a / f"T{k}_2018_{m}.json", m, oa, 500, {"21": 0.9, "24": rare})
             for m, (oas, rare) in per_map.items() for k, oa in enumerate(oas)]
    text = compare_models.write(files, models, [], tmp_path / "cmp.tsv", tmp_path / "cmp.png")
    rows = {line.split("\t")[0]: dict(zip(text.splitlines()[0].split("\t"), line.split("\t")))
            for line in text.splitlines()[1:]}
    # tempcnn is taken for the rare classes, and the maps cannot tell it from the forest in accuracy
    assert [rows[m]["take_for"] for m in ("rf", "tempcnn", "lstm")] == [
        "overall_accuracy", "overall_accuracy: level with rf,macro_f1", ""]
    said = comparison.recommendation(comparison.collect(files, models, []))
    assert said.startswith("For overall accuracy take rf") and "tempcnn within that interval" in said
    assert "no map has a reference sample: the choice rests on agreement with the training labels" in said
    low, high = scipy.stats.t.interval(0.95, 2, loc=0.82, scale=scipy.stats.sem([0.80, 0.82, 0.84]))
    assert (float(rows["rf"]["accuracy_low"]), float(rows["rf"]["accuracy_high"])) == pytest.approx((low, high), abs=1e-4)
    assert float(rows["tempcnn"]["macro_f1_mean"]) == pytest.approx(0.80, abs=1e-4)
    # every map has the same macro F1: an interval of no width
    assert rows["tempcnn"]["macro_f1_low"] == rows["tempcnn"]["macro_f1_high"] == "0.8000"
    choices = comparison.choose(comparison.collect(files, models, []))
    assert [(c.figure, c.model, c.level) for c in choices] == [
        ("overall accuracy", "rf", ["tempcnn"]), ("the rare classes (macro F1)", "tempcnn", [])]
    assert choices[0].sentence() == (f"for overall accuracy take rf (0.820, 95 % interval {low:.3f}-{high:.3f} over 3 "
                                     "maps; tempcnn within that interval)")


def test_one_map_gives_its_own_accuracy_interval_and_none_for_f1(run):
    files, models, _ = run
    lstm = comparison.collect(files, models, [])["lstm"]
    assert comparison.accuracy_estimate(lstm) == comparison.Estimate(0.95, 0.94, 0.96, 1)
    f1 = comparison.macro_f1_estimate(lstm)
    assert (f1.low, f1.high, f1.maps) == (None, None, 1) and f1.mean == pytest.approx(2 * 0.5 / 1.5)
    line = comparison.recommendation(comparison.collect(files, models, []))
    assert line.startswith("For overall accuracy take lstm (0.950, 95 % interval 0.940-0.960 over 1 map)")
    assert "for the rare classes (macro F1) take lstm (0.667, 1 map, no interval)" in line


def test_an_assessment_of_a_model_not_given_is_named(run, tmp_path):
    files, models, timings = run
    with pytest.raises(LcflowError, match=r"T1_2018_lstm\.json is of model 'lstm', which no --models directory "
                                          r"holds \(rf\)"):
        compare_models.write(files, models[:1], [], tmp_path / "cmp.tsv")
    assert not (tmp_path / "cmp.tsv").exists()


def test_a_model_without_assessment_and_broken_files_are_named(run, tmp_path):
    files, models, timings = run
    with pytest.raises(LcflowError, match="model lstm: no assessment among --assessments"):
        compare_models.write(files[:2], models, timings[:2], tmp_path / "cmp.tsv")
    files[0].write_text("{not json")
    with pytest.raises(LcflowError, match=r"T1_2018_rf\.json is not an assessment written by lcflow assess"):
        compare_models.write(files, models, timings, tmp_path / "cmp.tsv")
    (models[1] / "metrics.json").write_text(json.dumps({"model": "lstm", "world_size": 2}))
    with pytest.raises(LcflowError, match=r"lstm/metrics\.json is not the metrics of a model trained by lcflow "
                                          r"train \(KeyError: 'train_seconds'\)"):
        comparison.collect(files[1:], models, timings)
    (models[1] / "metrics.json").write_text(json.dumps({"model": "lstm", "train_seconds": 1.0}))
    timings[0].write_text(json.dumps({"model": "rf"}))
    with pytest.raises(LcflowError, match=r"T1_2018_rf_timing\.json: no 'px_per_s' \(not a timing file"):
        comparison.collect(files[1:], models, timings)
    assert not (tmp_path / "cmp.tsv").exists()


def test_compare_models_command_on_real_assessments(stages, tmp_path):
    """predict (with its timing file) -> assess -> compare-models, through the command line."""
    from lcflow.assess import accuracy
    from lcflow.maps import predict
    from lcflow.train import training

    model = tmp_path / "rf"
    training.train("rf", [str(stages["samples2018"])], model, {"n_estimators": 20})
    predict.run(model, stages["cube2018"], tmp_path / "m.tif", tmp_path / "c.tif", block=64,
                out_timing=tmp_path / "timing.json")
    timing = json.loads((tmp_path / "timing.json").read_text())
    assert timing["model"] == "rf" and timing["ranks"] == 1 and timing["pixels"] > 0
    accuracy.run(model, stages["samples2018"], tmp_path / "m.tif", tmp_path / "T_2018_rf.json")
    done = subprocess.run([str(Path(sys.executable).parent / "lcflow"), "compare-models", "--assessments",
                           str(tmp_path / "T_2018_rf.json"), "--models", str(model), "--timings",
                           str(tmp_path / "timing.json"), "--out", str(tmp_path / "cmp.tsv"), "--figure",
                           str(tmp_path / "cmp.png")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    header, line = (tmp_path / "cmp.tsv").read_text().splitlines()
    row = dict(zip(header.split("\t"), line.split("\t")))
    assessed = json.loads((tmp_path / "T_2018_rf.json").read_text())["test_samples"]
    assert row["accuracy_from"] == "test samples"
    assert row["take_for"] == "overall_accuracy,macro_f1"  # the one model is named for both
    assert float(row["accuracy_mean"]) == pytest.approx(assessed["overall_accuracy"], abs=1e-4)
    assert float(row["predict_px_s"]) == pytest.approx(timing["px_per_s"], abs=0.5)
    assert (tmp_path / "cmp.png").stat().st_size > 10_000


def _withheld(path: Path, model: str, n: int) -> Path:
    """An assessment whose test rows were too few to score (lcflow.common.evidence)."""
    path.write_text(json.dumps({"model": model, "test_samples": {
        "not_enough_evidence": f"{n} rows of 1 class; an accuracy needs ...", "n_samples": n, "n_classes": 1}}))
    return path


def test_a_map_without_evidence_enough_is_never_a_number_nor_a_choice(tmp_path):
    """rf's only map has 6 test rows of one class: the table says "not enough evidence" where its figures
    would stand, and the recommendation takes lstm (worse on paper than rf's 6 rows' 1.0) and says so."""
    models = [_model_dir(tmp_path / "models", "rf", 1.0, 1), _model_dir(tmp_path / "models", "lstm", 2.0, 1)]
    a = tmp_path / "assessment"
    a.mkdir()
    files = [_withheld(a / "T1_2018_rf.json", "rf", 6), _test_only(a / "T1_2018_lstm.json", "lstm", 0.7, 400, {"21": 0.7})]
    text = compare_models.write(files, models, [], tmp_path / "cmp.tsv", tmp_path / "cmp.png")
    head, *lines = text.splitlines()
    rows = {line.split("\t")[0]: dict(zip(head.split("\t"), line.split("\t"))) for line in lines}
    assert rows["rf"]["accuracy_from"] == "not enough evidence (1 maps)" and rows["rf"]["maps"] == "0"
    assert rows["rf"]["accuracy_mean"] == rows["rf"]["macro_f1"] == rows["rf"]["take_for"] == ""
    assert rows["lstm"]["take_for"] == "overall_accuracy,macro_f1"
    line = comparison.recommendation(comparison.collect(files, models, []))
    assert line.startswith("For overall accuracy take lstm (0.700") and "; rf: not enough evidence; no map has a reference sample" in line
    only = comparison.collect(files[:1], models[:1], [])
    assert comparison.choose(only) == [] and comparison.recommendation(only).startswith("No model to recommend")


def test_the_first_model_given_wins_a_tie(tmp_path):
    """Two models with the same maps: the one given first is taken, whichever order the files come in."""
    for order in (("rf", "lstm"), ("lstm", "rf")):
        root = tmp_path / "-".join(order)
        models = [_model_dir(root / "models", m, 1.0, 1) for m in order]
        (root / "a").mkdir()
        files = [_test_only(root / "a" / f"T1_2018_{m}.json", m, 0.8, 500, {"21": 0.8}) for m in ("rf", "lstm")]
        choices = comparison.choose(comparison.collect(files, models, []))
        assert [c.model for c in choices] == [order[0], order[0]], order
