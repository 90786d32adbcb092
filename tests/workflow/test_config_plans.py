"""A config refused before any job, or planned as the user wrote it: Snakemake's dry runs of the
Snakefile, no demo run needed (so these run beside the demo DAG's tests, not after them)."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ..conftest import ROOT, demo_config, job_counts, snakemake

pytestmark = pytest.mark.integration
DEMO = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def _lcflow_lines(done) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("lcflow:")]


def test_bad_config_stops_before_any_job(tmp_path):
    bad = {**DEMO, "tiles": ["31UFT", "31UFTX"]}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    done = snakemake(tmp_path, "-n", configfile=tmp_path / "bad.yaml")
    assert done.returncode != 0
    assert _lcflow_lines(done) == [
        "lcflow: config: tiles[1] = '31UFTX' is not a valid MGRS tile id "
        f"(pattern ^(0[1-9]|[1-5][0-9]|60)[C-HJ-NP-X][A-HJ-NP-Z][A-HJ-NP-V]$) (set in {tmp_path / 'bad.yaml'})"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".snakemake") == ["bad.yaml"]


def test_shell_in_a_model_parameter_is_refused_before_any_job(tmp_path):
    cfg = demo_config(tmp_path / "c.yaml", results="results", resources="resources")
    text = yaml.safe_load(cfg.read_text())
    text["model_params"]["rf"]["criterion"] = "$(touch FILE)"
    cfg.write_text(yaml.safe_dump(text))
    done = snakemake(tmp_path, configfile=cfg)
    assert done.returncode != 0
    assert _lcflow_lines(done) == [
        "lcflow: config: model_params.rf.criterion = '$(touch FILE)': expected one of gini, entropy, log_loss "
        f"(set in {cfg})"]
    # no FILE, no results, no job (.snakemake, where present, is Snakemake's own bookkeeping)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".snakemake") == ["c.yaml"]
    assert not list(tmp_path.rglob("FILE"))


def test_a_users_config_replaces_the_demo_config(tmp_path):
    """A real-data config (README's "Your own tiles"): its keys are not merged with the demo's (no demo, aoi or catalog creep in)."""
    shutil.copy(ROOT / "tests" / "data" / "clc_lanjaron_epsg3042.tif", tmp_path / "clc.tif")
    mine = {"tiles": ["30SVF"], "years": [2019], "aoi": {"30SVF": [455000, 4085000, 461000, 4095000]},
            "stac": {"api": "https://earth-search.aws.element84.com/v1", "max_cloud_cover": 80},
            "labels": {"corine": "clc.tif", "level": 2}, "models": ["rf"]}
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(mine))
    done = snakemake(tmp_path, "-n", configfile=tmp_path / "mine.yaml")
    assert done.returncode == 0, done.stderr[-3000:]
    counts = job_counts(done.stdout + done.stderr)
    assert counts == {"search": 1, "stage": 1, "cube": 1, "labels": 1, "sample": 1, "train_rf": 1, "predict_rf": 1, "quicklook": 1,
                      "consistent_maps": 1, "change_summary": 1, "design_sample": 1, "assess": 1, "summary": 1,
                      "stac_map_item": 1, "stac_catalog": 1, "compare_models": 1, "job_resources": 1, "all": 1}, counts


def test_a_bad_value_names_the_config_file_that_set_it(tmp_path):
    base = demo_config(tmp_path / "base.yaml", results="results", resources="resources")
    (tmp_path / "over.yaml").write_text("sample:\n  fractions: {train: 0.5, val: 0.2, test: 0.2}\n")
    done = snakemake(tmp_path, "-n", configfile=[base, tmp_path / "over.yaml"])
    assert done.returncode != 0
    lines = _lcflow_lines(done)
    assert len(lines) == 1 and lines[0].startswith("lcflow: config: sample.fractions = {")
    assert lines[0].endswith(f"sum to 0.9, not 1 (set in {tmp_path / 'over.yaml'})"), lines


def test_a_study_folder_that_declares_the_workflow_a_module_plans_the_demo(tmp_path):
    """docs/own-data.md's deployment, as the Snakemake workflow catalog deploys: an empty folder with the
    Snakefile the docs give (lcflow's a module of it) and a config of its own plans the demo's DAG."""
    text = (ROOT / "docs" / "own-data.md").read_text()
    module = re.search(r"## A study folder of its own.*?```python\n(.*?)```", text, re.S).group(1)
    study = tmp_path / "my-study"
    (study / "workflow").mkdir(parents=True)
    (study / "config").mkdir()
    (study / "workflow" / "Snakefile").write_text(module.replace("/path/to/lcflow/Snakefile", str(ROOT / "Snakefile")))
    shutil.copy(ROOT / "config" / "config.yaml", study / "config" / "config.yaml")
    done = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "-n", "--cores", "2"], cwd=study,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    counts = job_counts(done.stdout)
    assert counts["cube"] == len(DEMO["tiles"]) * len(DEMO["years"]) and counts["all"] == 1, counts
    assert sorted(p.name for p in study.iterdir() if p.name != ".snakemake") == ["config", "workflow"]
