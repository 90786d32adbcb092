"""The demo DAG through Snakemake, in a scratch directory: accuracy bars, map format, reruns, errors."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
import yaml

from lcflow import nomenclature

from .conftest import ROOT, job_counts, snakemake

pytestmark = pytest.mark.integration
DEMO = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


@pytest.fixture(scope="module")
def run(local_demo_run) -> Path:
    return local_demo_run


def test_maps_meet_the_accuracy_bar(run):
    rows = list(csv.DictReader((run / "accuracy.tsv").open(), delimiter="\t"))
    assert len(rows) == len(DEMO["tiles"]) * len(DEMO["years"]) * len(DEMO["models"])
    bar = {"rf": 0.85, "lstm": 0.90}
    for row in rows:
        assert float(row["truth_OA"]) >= bar[row["model"]], row
        detail = json.loads((run / "assessment" / f"{row['map']}.json").read_text())
        assert detail["truth"]["overall_accuracy"] == pytest.approx(float(row["truth_OA"]), abs=1e-4)


def test_maps_are_georeferenced_cogs_with_the_nomenclature(run):
    level2 = nomenclature.clc_level(2)
    for tile, epsg in (("31UFT", 32631), ("32ULC", 32632)):
        for year in DEMO["years"]:
            for model in DEMO["models"]:
                with rasterio.open(run / "maps" / f"{tile}_{year}_{model}.tif") as ds:
                    assert ds.crs.to_epsg() == epsg and ds.res == (10.0, 10.0)
                    assert list(ds.bounds) == DEMO["aoi"][tile]
                    assert ds.tags(ns="IMAGE_STRUCTURE")["LAYOUT"] == "COG"
                    assert ds.dtypes[0] == "uint8" and ds.nodata == 255
                    codes = set(np.unique(ds.read(1)).tolist()) - {255}
                    assert codes <= set(level2.codes) and len(codes) >= 6
                    cmap = ds.colormap(1)
                    assert all(cmap[c][:3] == level2.colors[c] for c in codes)
                    assert json.loads(ds.tags()["class_names"])["21"] == "Arable land"
                with rasterio.open(run / "maps" / f"{tile}_{year}_{model}_confidence.tif") as ds:
                    assert ds.dtypes[0] == "uint8" and list(ds.bounds) == DEMO["aoi"][tile]


def test_rerun_does_nothing_and_forcerun_reruns_only_downstream(run):
    workdir = run.parent
    again = snakemake(workdir, "-n")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    forced = snakemake(workdir, "-n", "--forcerun", "train")
    counts = job_counts(forced.stdout + forced.stderr)
    n_maps = len(DEMO["tiles"]) * len(DEMO["years"])
    assert counts == {"train": 1, "predict": n_maps, "assess": n_maps, "summary": 1, "all": 1}


def test_report(run):
    done = snakemake(run.parent, "--report", str(run / "report.html"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert (run / "report.html").stat().st_size > 10_000


def test_bad_config_stops_before_any_job(tmp_path):
    bad = {**DEMO, "tiles": ["31UFT", "31UFTX"]}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    done = snakemake(tmp_path, "-n", "--configfile", str(tmp_path / "bad.yaml"))
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.startswith("lcflow:")]
    assert lines == ["lcflow: config: tiles[1] = '31UFTX' is not a valid MGRS tile id "
                     "(pattern ^(0[1-9]|[1-5][0-9]|60)[C-HJ-NP-X][A-HJ-NP-Z][A-HJ-NP-V]$)"]
    assert not (tmp_path / "results").exists() and not (tmp_path / "resources").exists()
