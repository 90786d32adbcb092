"""config/attention.yaml, the documented config of the attention models: ltae and presto are tuned (presto),
trained on the local profile's two ranks, map, are assessed and compared beside the forest, and the blend
of the forest and ltae is made, mapped from their probabilities, assessed and compared too."""

import csv
import json

import pytest
import rasterio
import yaml

from ..conftest import ROOT, job_counts, snakemake

CONFIG = yaml.safe_load((ROOT / "config" / "attention.yaml").read_text())
#: the config as documented, with a training budget a test can wait for (presto, pretrained and the
#: slowest by far, the shortest, in half batches; the forest, which the blend maps again, of 60 trees)
#: and its last year alone (presto maps about 1,200 px/s on 2 CPU cores)
BUDGET = {"ltae": {"epochs": 2, "min_steps": 40, "evaluations": 2},
          "presto": {"epochs": 1, "min_steps": 20, "evaluations": 2, "batch_size": 64}, "rf": {"n_estimators": 60}}
YEARS = CONFIG["years"][-1:]


def test_the_attention_config_tunes_trains_maps_and_assesses_ltae_and_presto(tmp_path):
    cfg = {**CONFIG, "years": YEARS,
           "model_params": {m: {**p, **BUDGET.get(m, {})} for m, p in CONFIG["model_params"].items()}}
    (tmp_path / "attention.yaml").write_text(yaml.safe_dump(cfg))
    results = tmp_path / cfg["results"]
    # the products that say how each model did (not the quicklooks, STAC items and change figures)
    done = snakemake(tmp_path, str(results.relative_to(tmp_path) / "accuracy.tsv"),
                     str(results.relative_to(tmp_path) / "model_comparison.tsv"), configfile=tmp_path / "attention.yaml")
    assert done.returncode == 0, done.stderr[-4000:]
    counts = job_counts(done.stdout + done.stderr)
    assert counts["hpo"] == 1 and counts["train"] == 2 and counts["predict"] == 2 and counts["predict_rf"] == 1, counts
    assert counts["blend"] == 1 and counts["predict_blend"] == 1, counts
    best = yaml.safe_load((results / "hpo" / "presto" / "best_params.yaml").read_text())
    assert best["trials"]["complete"] + best["trials"]["pruned"] == 2 and best["world_size"] == 2, best
    for model in ("ltae", "presto"):
        metrics = json.loads((results / "models" / model / "metrics.json").read_text())
        assert metrics["world_size"] == 2 and metrics["launcher"] == "horovod", metrics
        assert ("tuned" in metrics) == (model == "presto")
    assert metrics["tuned"]["params"] == best["params"] and metrics["params"]["pretrained"] is True
    assert metrics["resumed"]["finished_before"]  # the study's best trial is the final presto, untrained again
    accuracy = list(csv.DictReader((results / "accuracy.tsv").open(), delimiter="\t"))
    assert sorted(r["map"] for r in accuracy) == sorted(
        f"31UFT_{y}_{m}" for m in cfg["models"] for y in cfg["years"]), accuracy
    for row in accuracy:  # every map assessed against the demo's truth and its reference sample, well above a guess
        assert float(row["truth_OA"]) > 0.7 and float(row["reference_OA"]) > 0.7, row
    compared = list(csv.DictReader((results / "model_comparison.tsv").open(), delimiter="\t"))
    assert [r["model"] for r in compared] == cfg["models"] and all(float(r["predict_px_s"]) > 0 for r in compared)
    with rasterio.open(results / "maps" / "31UFT_2019_presto.tif") as src:
        assert (src.width, src.height) == (128, 128)
    # the blend: its members' training time, and its map's time includes theirs
    blended = json.loads((results / "models" / "blend" / "metrics.json").read_text())
    trained = {m: json.loads((results / "models" / m / "metrics.json").read_text()) for m in ("rf", "ltae")}
    assert blended["members"] == ["rf", "ltae"] and blended["test"]["n_samples"] > 0
    assert blended["train_seconds"] == pytest.approx(sum(t["train_seconds"] for t in trained.values()))
    timing = json.loads((results / "maps" / "raw" / "31UFT_2019_blend_timing.json").read_text())
    assert timing["members_seconds"] == pytest.approx(sum(
        json.loads((results / "maps" / "raw" / f"31UFT_2019_{m}_timing.json").read_text())["seconds"] for m in ("rf", "ltae")),
        abs=1e-5)
    row = {r["model"]: r for r in compared}["blend"]
    assert float(row["predict_px_s"]) < min(float(r["predict_px_s"]) for r in compared if r["model"] in ("rf", "ltae"))
