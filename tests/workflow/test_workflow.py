"""The demo DAG through Snakemake, in a scratch directory: accuracy bars, map format, reruns, errors."""

import base64
import csv
import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import rasterio
import yaml

from lcflow.labels import nomenclature

from ..conftest import (
    HOSTILE_RESOURCES,
    HOSTILE_RESULTS,
    ROOT,
    corine_polygons,
    job_counts,
    missing,
    snakemake,
)

pytestmark = pytest.mark.integration
DEMO = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


@pytest.fixture(scope="module")
def run(local_demo_run) -> Path:
    return local_demo_run


def test_maps_meet_the_accuracy_bar(run):
    rows = list(csv.DictReader((run / "accuracy.tsv").open(), delimiter="\t"))
    assert len(rows) == len(DEMO["tiles"]) * len(DEMO["years"]) * len(DEMO["models"])
    # on checked labels every map is 0.957-0.984 right against the truth (0.928-0.971 before the checks)
    bar = {"rf": 0.95, "lstm": 0.95, "tempcnn": 0.95}
    for row in rows:
        assert float(row["truth_OA"]) >= bar[row["model"]], row
        detail = json.loads((run / "assessment" / f"{row['map']}.json").read_text())
        assert detail["truth"]["overall_accuracy"] == pytest.approx(float(row["truth_OA"]), abs=1e-4)
    # the deep models stay level with the forest on every tile-year, against the truth (the forest gained
    # most from the label checks: 32ULC lstm 0.962 / rf 0.965 in 2018, tempcnn 0.957 / rf 0.968 in 2019)
    truth = {(*r["map"].split("_")[:2], r["model"]): float(r["truth_OA"]) for r in rows}
    for tile, year, model in truth:
        if model != "rf":
            assert truth[tile, year, model] >= truth[tile, year, "rf"] - 0.015, (tile, year, model, truth)


def test_the_map_series_is_consistent_across_years(run):
    """The maps a user receives (maps/) are the consistent series: on every tile and model, truly stable
    pixels keep their class (>= 0.98), the planted changes are found (F1 >= 0.7), and the maps are no less
    right against the truth than the independent annual maps in maps/raw (measured: stable 0.991-1.000
    against 0.965-0.987, F1 0.85-0.96 against 0.64-0.78, OA +0.002 to +0.006)."""
    rows = list(csv.DictReader((run / "changes.tsv").open(), delimiter="\t"))
    assert len(rows) == len(DEMO["tiles"]) * (len(DEMO["years"]) - 1) * len(DEMO["models"])
    for row in rows:
        assert float(row["stable_kept"]) >= 0.98 and float(row["change_f1"]) >= 0.7, row
        assert float(row["stable_kept"]) > float(row["stable_kept_raw"]) and float(row["change_f1"]) > float(row["change_f1_raw"]), row
        assert float(row["truth_OA"]) >= float(row["truth_OA_raw"]), row
        assert float(row["changed"]) < float(row["changed_raw"]), row
    for tile in DEMO["tiles"]:
        for model in DEMO["models"]:
            summary = json.loads((run / "changes" / f"{tile}_{model}.json").read_text())
            pair = summary["pairs"][0]
            with rasterio.open(run / "changes" / f"{tile}_{DEMO['years'][0]}_{DEMO['years'][1]}_{model}.tif") as ds:
                codes = ds.read(1)
                assert ds.tags(ns="IMAGE_STRUCTURE")["LAYOUT"] == "COG" and ds.dtypes[0] == "uint16"
            maps = []
            for year in DEMO["years"]:
                with rasterio.open(run / "maps" / f"{tile}_{year}_{model}.tif") as ds:
                    maps.append(ds.read(1))
                assert (run / "maps" / "raw" / f"{tile}_{year}_{model}.tif").exists()
                assert not (run / "maps" / "raw" / f"{tile}_{year}_{model}_probabilities.tif").exists()  # temporary
            both = (maps[0] != 255) & (maps[1] != 255)
            assert np.array_equal(codes[both] != 0, maps[0][both] != maps[1][both])
            assert pair["consistent"]["changed_fraction"] == pytest.approx(float((codes[both] != 0).mean()))
            assert (run / "changes" / f"{tile}_{DEMO['years'][0]}_{DEMO['years'][1]}_{model}.png").stat().st_size > 0


def test_every_product_has_a_stac_item_in_one_catalog(run):
    """Items beside every map and change map, gathered by results/stac/catalog.json: valid STAC 1.1
    (the core schemas pystac ships, no network), with projection, raster, file and classification fields
    that match the files, and links that resolve."""
    import hashlib

    import pystac
    import pystac.validation

    catalog = pystac.Catalog.from_file(str(run / "stac" / "catalog.json"))
    items = {i.id: i for i in catalog.get_items()}
    n_maps = len(DEMO["tiles"]) * len(DEMO["years"]) * len(DEMO["models"])
    assert len(items) == n_maps + len(DEMO["tiles"]) * (len(DEMO["years"]) - 1) * len(DEMO["models"])
    level2 = nomenclature.clc_level(2)
    for item in items.values():
        pystac.validation.validate_dict(item.to_dict(), extensions=[])
        asset = item.assets["change" if "change" in item.assets else "class"]
        path = Path(asset.get_absolute_href())
        assert path.exists() and path.parent.name in ("maps", "changes")
        with rasterio.open(path) as ds:
            assert item.properties["proj:code"] == f"EPSG:{ds.crs.to_epsg()}"
            assert item.properties["proj:shape"] == [ds.height, ds.width]
            assert asset.extra_fields["raster:bands"][0]["data_type"] == ds.dtypes[0]
        assert asset.extra_fields["file:size"] == path.stat().st_size
        assert asset.extra_fields["file:checksum"] == "1220" + hashlib.sha256(path.read_bytes()).hexdigest()
        classes = {c["value"]: c for c in asset.extra_fields["classification:classes"]}
        if "class" in item.assets:
            assert classes[31]["description"] == "Forests"
            assert classes[31]["color_hint"] == "{:02X}{:02X}{:02X}".format(*level2.colors[31])
            accuracy = item.properties["lcflow:accuracy"]
            assert 0.9 < accuracy["truth"]["overall_accuracy"] <= 1 and accuracy["reference"]["overall_accuracy_ci95"] > 0
            assert Path(item.assets["confidence"].get_absolute_href()).exists()
            manifest = next(link for link in item.links if link.rel == "derived_from")
            assert Path(manifest.get_absolute_href()).name == "items.json" and Path(manifest.get_absolute_href()).exists()
        else:
            assert classes[0]["description"] == "no change" and len(classes) > 1
        lon0, lat0, lon1, lat1 = item.bbox
        assert 2 < lon0 < lon1 < 10 and 50 < lat0 < lat1 < 53  # the demo tiles, in the Netherlands and Germany


def test_reference_sample_estimates_hold_the_true_areas_and_accuracy(run):
    """The demo draws a stratified random design from the rf map of each tile-year and labels it from the
    truth; every map's assessment then gives area-adjusted class areas and overall accuracy with 95 %
    intervals, which must hold the true values (from the truth rasters) for most classes and maps.

    The class areas come from the reference labels and the design's strata alone, so they are one
    estimate per tile-year, whichever map is assessed; they are counted once each. With the consistent
    maps 23 to 29 of 32 hold the true area (it was 28 of 32 with the independent maps): the misses are
    omissions of a few hundred pixels into large strata that the sample hardly sees (docs/stages.md).

    The maps of one tile-year share its reference sample, so their overall accuracies miss together:
    one tile-year's sample (31UFT 2019) has put all three maps' estimates 0.010-0.019 under the truth,
    beyond their 95 % intervals, because strata in which the sample met no error get no variance. So
    every map's true OA must lie within twice its 95 % half-width, and inside it for the maps of at
    least three of the four tile-year samples."""
    level2 = nomenclature.clc_level(2)
    inside = total = oa_inside = 0
    estimates, samples_holding_oa = {}, {}
    for path in sorted((run / "assessment").glob("*.json")):
        detail = json.loads(path.read_text())
        ref = detail["reference"]
        assert ref["design"].startswith("stratified") and ref["points_unlabelled"] == 0 and ref["points_used"] >= 100
        assert "not map accuracy" in detail["test_samples"]["what"]
        tile, year = path.stem.split("_")[:2]
        estimate = list(zip(ref["classes"], ref["area_ha"], ref["area_ci95_ha"]))
        assert estimates.setdefault((tile, year), estimate) == estimate  # the same whichever map is assessed
        miss = abs(ref["overall_accuracy"] - detail["truth"]["overall_accuracy"])
        assert miss <= 2 * ref["overall_accuracy_ci95"], (path.name, ref["overall_accuracy"], detail["truth"])
        oa_inside += miss <= ref["overall_accuracy_ci95"]
        held = samples_holding_oa.get((tile, year), True)
        samples_holding_oa[tile, year] = held and miss <= ref["overall_accuracy_ci95"]
    for (tile, year), estimate in estimates.items():
        with rasterio.open(run.parent / HOSTILE_RESOURCES / "truth" / f"{tile}_{year}.tif") as ds:
            truth = level2.apply(ds.read(1))
            pixel_ha = abs(ds.transform.a * ds.transform.e) / 10_000
        for code, area, ci in estimate:
            inside += abs(area - (truth == code).sum() * pixel_ha) <= ci
            total += 1
    n_maps = len(list((run / "assessment").glob("*.json")))
    print(f"true class areas inside the 95 % intervals: {inside} of {total} (one estimate per tile-year); "
          f"true OA inside: {oa_inside} of {n_maps} maps")
    assert inside > 0.5 * total and sum(samples_holding_oa.values()) >= 3, samples_holding_oa
    rows = list(csv.DictReader((run / "accuracy.tsv").open(), delimiter="\t"))
    assert all(0 < float(r["reference_OA_ci95"]) < 0.05 for r in rows)


def test_training_samples_carry_the_true_label_and_skip_changed_pixels(run):
    """Label cleaning and transfer on the demo: at least 0.93 of the train/val labels equal the truth in
    every tile-year, and at most 20 % of the second year's samples on planted changes survive."""
    level2 = nomenclature.clc_level(2)
    demo_dir = run.parent / HOSTILE_RESOURCES
    for tile in DEMO["tiles"]:
        truth = {}
        for year in DEMO["years"]:
            with rasterio.open(demo_dir / "truth" / f"{tile}_{year}.tif") as src:
                truth[year] = level2.apply(src.read(1))
        planted = truth[DEMO["years"][0]] != truth[DEMO["years"][1]]
        for year in DEMO["years"]:
            frame = pd.read_parquet(run / tile / str(year) / "samples.parquet")
            judged = frame[frame["split"].isin(["train", "val"])]
            true_share = float((judged["label"].to_numpy() == truth[year][judged["row"], judged["col"]]).mean())
            assert true_share >= 0.93, (tile, year, true_share)
            if year != DEMO["years"][0]:
                # candidates on planted changes, against those that survived the change test and cleaning
                checks = json.loads(pq.read_schema(run / tile / str(year) / "samples.parquet").metadata[b"lcflow"])
                assert checks["label_checks"]["applied"][0]["check"] == "change since the reference year"
                survived = int(planted[judged["row"], judged["col"]].sum())
                expected = planted.mean() * len(judged)  # what random sampling of pixels would have kept
                assert survived <= 0.2 * expected, (tile, year, survived, expected)


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


def test_the_demo_ran_with_paths_a_shell_would_split_or_run(run):
    workdir = run.parent
    assert run.name == HOSTILE_RESULTS and (workdir / HOSTILE_RESOURCES / "catalog" / "catalog.json").exists()
    assert sorted(p.name for p in workdir.iterdir()) == sorted([".snakemake", "demo.yaml", HOSTILE_RESOURCES, HOSTILE_RESULTS])
    assert not list(workdir.rglob("FILE"))  # $(touch FILE) in the results path was never run
    logs = list((run / "logs").rglob("*.log"))
    assert len(logs) >= 20 and all(p.stat().st_size > 0 for p in logs if p.parent.name in ("cube", "train"))


def test_rerun_does_nothing_and_forcerun_reruns_only_downstream(run):
    workdir = run.parent
    config = workdir / "demo.yaml"
    again = snakemake(workdir, "-n", configfile=config)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    forced = snakemake(workdir, "-n", "--forcerun", "train", configfile=config)
    counts = job_counts(forced.stdout + forced.stderr)
    deep = [m for m in DEMO["models"] if m != "rf"]  # the rule train; rf has its own (train_rf)
    n_maps = len(DEMO["tiles"]) * len(DEMO["years"]) * len(deep)
    n_series = len(DEMO["tiles"]) * len(deep)
    n_pairs = n_series * (len(DEMO["years"]) - 1)
    assert counts == {"train": len(deep), "learning_curve": len(deep), "predict": n_maps, "quicklook": n_maps,
                      "consistent_maps": n_series, "change_figure": n_pairs, "change_summary": 1, "assess": n_maps,
                      "stac_map_item": n_maps, "stac_change_item": n_pairs, "stac_catalog": 1, "summary": 1,
                      "compare_models": 1, "job_resources": 1, "all": 1}


def test_readme_s_rerun_recipes_plan_what_they_say(run):
    """README's lines that rerun every model, one model, one tile-year's map, one tile-year from its cube:
    each plans its own jobs and what is made from them, and nothing else."""
    workdir, config = run.parent, run.parent / "demo.yaml"
    recipes = re.findall(r"^snakemake --profile slurm --forcerun (.+?)  +#", (ROOT / "README.md").read_text(), re.M)
    assert len(recipes) >= 4, recipes

    def plan(*targets: str) -> dict[str, int]:
        done = snakemake(workdir, "-n", "--forcerun", *targets, configfile=config)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "holds products of tiles, years or models this config does not name" not in done.stderr
        return job_counts(done.stdout + done.stderr)

    deep = [m for m in DEMO["models"] if m != "rf"]
    tiles, years = len(DEMO["tiles"]), len(DEMO["years"])
    every = plan(*recipes[0].replace("results/", f"{HOSTILE_RESULTS}/").split())
    assert every["train"] == len(deep) and every["train_rf"] == 1
    assert every["predict"] + every["predict_rf"] == tiles * years * len(DEMO["models"])
    one_model = plan(recipes[1].replace("results/", f"{HOSTILE_RESULTS}/"))
    assert one_model["train"] == 1 and "train_rf" not in one_model and one_model["predict"] == tiles * years
    assert one_model["consistent_maps"] == tiles and one_model["assess"] == tiles * years
    one_map = plan(recipes[2].replace("results/", f"{HOSTILE_RESULTS}/"))
    # the series of the tile and model is made again from every year's probabilities (kept only while needed)
    assert one_map["predict"] == years and one_map["consistent_maps"] == 1 and "train" not in one_map
    assert one_map["assess"] == years and "cube" not in one_map
    one_cube = plan(recipes[3].replace("results/", f"{HOSTILE_RESULTS}/"))
    assert one_cube["cube"] == 1 and one_cube["sample"] >= 1 and "search" not in one_cube
    assert one_cube["train"] == len(deep)  # the models learn from that tile-year's samples too


def test_a_dropped_tile_s_products_are_named_and_kept(run, tmp_path):
    """A tile dropped from a finished run's config: its maps, quicklooks, assessments and change maps stay
    where a person looks for the current ones; the controller names them by folder and removes none."""
    over = tmp_path / "one-tile.yaml"
    kept, dropped = DEMO["tiles"]
    over.write_text(yaml.safe_dump({"tiles": [kept]}))
    before = sorted(p for p in run.rglob("*") if p.name.startswith(f"{dropped}_") or p.name == dropped)
    done = snakemake(run.parent, "-n", configfile=[run.parent / "demo.yaml", over], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    [said] = [line for line in done.stderr.splitlines() if "holds products of tiles" in line]
    for folder in ("maps", "maps/raw", "quicklooks", "assessment", "changes"):
        n = len([p for p in (run / folder).iterdir() if p.is_file() and p.name.startswith(f"{dropped}_")])
        assert n and (f"{folder} {n}," in said or f"{folder} {n};" in said), (folder, n, said)
    assert f"TILE/YEAR {len(DEMO['years'])};" in said and f"/maps/{dropped}_" in said
    assert sorted(p for p in run.rglob("*") if p.name.startswith(f"{dropped}_") or p.name == dropped) == before


def test_a_plain_rerun_finishes_an_interrupted_one(run, tmp_path):
    """A forced rerun of one tile-year's LSTM map that stopped once the tile's consistent series was made,
    before the figures and assessments made from it (as an interruption there leaves it; --until makes
    that point exact): a plain rerun then makes everything made from the new maps, and leaves no product
    older than what it was made from and no temporary probabilities behind (the same maps again are files
    newer than their products: made again, as a real tile's would be)."""
    work = tmp_path / "work"
    shutil.copytree(run.parent, work, symlinks=True)
    results = work / HOSTILE_RESULTS
    tile, model = DEMO["tiles"][0], "lstm"
    forced = snakemake(work, "--forcerun", f"{HOSTILE_RESULTS}/maps/raw/{tile}_{DEMO['years'][0]}_{model}.tif",
                       "--until", "consistent_maps", configfile=work / "demo.yaml", timeout=900)
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert job_counts(forced.stdout + forced.stderr) == {"predict": len(DEMO["years"]), "consistent_maps": 1}

    def stale() -> list[str]:
        """The products of the tile's maps older than the consistent map they show or assess."""
        older = []
        for year in DEMO["years"]:
            made = (results / "maps" / f"{tile}_{year}_{model}.tif").stat().st_mtime
            older += [p.name for p in (results / "quicklooks" / f"{tile}_{year}_{model}.quicklook.png",
                                       results / "assessment" / f"{tile}_{year}_{model}.json") if p.stat().st_mtime < made]
        return older

    assert len(stale()) == 2 * len(DEMO["years"])
    again = snakemake(work, configfile=work / "demo.yaml", timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert stale() == [] and not list((results / "maps" / "raw").glob("*_probabilities.tif"))
    assert (results / "accuracy.tsv").stat().st_mtime >= max(p.stat().st_mtime for p in (results / "assessment").glob("*.json"))
    done = snakemake(work, "-n", configfile=work / "demo.yaml")
    assert "Nothing to be done" in done.stdout + done.stderr


def test_report_embeds_every_figure_and_the_accuracy_table(run):
    done = snakemake(run.parent, "--report", str(run / "report.html"), configfile=run.parent / "demo.yaml")
    assert done.returncode == 0, done.stderr[-2000:]
    html = (run / "report.html").read_text(encoding="utf-8")
    embedded = {m.group(1): m.group(2) for m in re.finditer(
        r'"filename": "([^"]+)".*?"data_uri": "data:[^;]+;charset=utf8;filename=[^;]+;base64,([^"]+)"', html, re.S)}
    expected = {f"{t}_{y}_{m}.png" for t in DEMO["tiles"] for y in DEMO["years"] for m in DEMO["models"]}
    changes = {f"{t}_{DEMO['years'][0]}_{DEMO['years'][1]}_{m}.png" for t in DEMO["tiles"] for m in DEMO["models"]}
    assert expected | changes | {"accuracy.tsv", "changes.tsv"} <= set(embedded), sorted(embedded)
    for name in changes:
        assert base64.b64decode(embedded[name]) == (run / "changes" / name).read_bytes(), name
    assert html.count("Change between two consecutive years of the consistent map series") >= len(changes)
    for name in expected:  # the figures themselves, byte for byte, with their caption
        assert base64.b64decode(embedded[name]) == (run / "assessment" / name).read_bytes(), name
    assert base64.b64decode(embedded["accuracy.tsv"]) == (run / "accuracy.tsv").read_bytes()
    # every model on one page: the figure, its table (one line per model, each with its speed) and caption
    for name in ("model_comparison.png", "model_comparison.tsv"):
        assert base64.b64decode(embedded[name]) == (run / name).read_bytes(), name
    compared = list(csv.DictReader((run / "model_comparison.tsv").open(), delimiter="\t"))
    assert [r["model"] for r in compared] == DEMO["models"]
    assert all(float(r["predict_px_s"]) > 0 and float(r["train_s"]) > 0 and r["maps"] == str(
        len(DEMO["tiles"]) * len(DEMO["years"])) for r in compared), compared
    # one model named for overall accuracy and one for the rare classes, and the caption says how
    taken = [t for r in compared for t in r["take_for"].split(",") if t and "level with" not in t]
    assert sorted(taken) == ["macro_f1", "overall_accuracy"]
    assert "Every model of the run side by side, to pick one" in html and "names the model to take" in html
    assert html.count("Row-normalised confusion matrix of the map against the truth raster") >= len(expected)
    # a quicklook and a class-area figure of every map, a learning curve of every deep model
    for name in expected:
        quicklook = name.replace(".png", ".quicklook.png")
        assert base64.b64decode(embedded[quicklook]) == (run / "quicklooks" / quicklook).read_bytes(), quicklook
        areas = name.replace(".png", ".areas.png")
        assert base64.b64decode(embedded[areas]) == (run / "assessment" / areas).read_bytes(), areas
    assert html.count('"filename": "learning_curve.png"') >= len(DEMO["models"]) - 1
    assert html.count("The map's classes in the nomenclature's colours") >= len(expected)
    assert html.count("area-adjusted estimate from that sample") >= len(expected)
    assert html.count("the dashed line marks the round whose weights the model kept") == len(DEMO["models"]) - 1
    # the studies: their figures, which models were tuned, and what their final training took
    for model in DEMO["hpo"]["models"]:
        for name in ("optimisation_history.png", "param_importances.png", "intermediate_values.png"):
            assert any(base64.b64decode(data) == (run / "hpo" / model / name).read_bytes()
                       for data in re.findall(rf'"filename": "{name}".*?base64,([^"]+)"', html, re.S)), (model, name)
        assert f"Optimisation history of the {model} study" in html
        assert f"The final training of {model} took the" in html
    assert f"The models {', '.join(DEMO['hpo']['models'])} were tuned first" in html



def test_the_report_gives_each_stages_wall_time_and_memory(run):
    """Every job that does real work left a benchmark file; the table built from them (in the report) has
    each stage's jobs, wall time and peak memory as measured."""
    import pandas as pd

    table = pd.read_csv(run / "job_resources.tsv", sep="\t").set_index("stage")
    for stage in ("synth", "search", "stage", "cube", "labels", "sample", "train", "predict", "consistent_maps", "assess"):
        assert stage in table.index, table
        assert table.loc[stage, "wall_s_max"] > 0 and table.loc[stage, "wall_s_total"] >= table.loc[stage, "wall_s_max"]
    n_maps = len(DEMO["tiles"]) * len(DEMO["years"]) * len(DEMO["models"])
    assert table.loc["predict", "jobs"] == n_maps and table.loc["cube", "jobs"] == len(DEMO["tiles"]) * len(DEMO["years"])
    # the cube's peak memory is the largest of its jobs' files, as Snakemake measured them
    cubes = [pd.read_csv(p, sep="\t", na_values=["NA"]).iloc[-1]["max_rss"] for p in (run / "benchmarks" / "cube").glob("*.tsv")]
    assert table.loc["cube", "max_rss_mb"] == pytest.approx(max(cubes), abs=0.01) and max(cubes) > 50
    assert len(list((run / "benchmarks" / "synth").glob("*.tsv"))) == len(DEMO["tiles"]) * len(DEMO["years"])
    assert (run / "job_resources.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = run / "report.html"
    if report.exists():
        assert '"filename": "job_resources.png"' in report.read_text(encoding="utf-8")


def test_lcflow_budget_of_the_demo_is_within_twice_its_measured_jobs(run, tmp_path):
    """lcflow budget on the demo's config and this run's counts (items, sample tables), on this machine as
    profiles/local runs it, against the CPU this run's jobs spent (its benchmark files): all stages together
    within a factor of 2, and every stage that spent 30 CPU s or more within a factor of 2 of the stages'
    median ratio.

    The rates are one machine's (rates.json says which): on another, every stage runs faster or slower by
    its own machine's factor (on a CI machine the budget came to 1.08 times what the sample jobs spent and
    2.07 times what the hpo jobs did), so a stage is held to its share of the work, the machine aside."""
    import os
    import statistics
    import subprocess
    import sys

    from lcflow import job_resources

    work = run.parent
    done = subprocess.run([str(Path(sys.executable).parent / "lcflow"), "budget", "--configfile",
                           str(work / "demo.yaml"), "--directory", str(work), "--profile", "local", "--json",
                           str(tmp_path / "b.json")], capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if not k.startswith("LCFLOW_SLURM_")})
    assert done.returncode == 0, done.stderr
    assert "scenes: 4 tile-year(s) counted in their items.json" in done.stdout
    budgeted = json.loads((tmp_path / "b.json").read_text())["cpu_s_by_stage"]
    measured = job_resources.read(run / "benchmarks").groupby("stage")["cpu_s"].sum().to_dict()
    compared = {stage: (budgeted[stage], measured[stage]) for stage in budgeted if stage in measured}
    assert {"stage", "cube", "sample", "hpo", "train", "predict", "assess"} <= set(compared)
    # a training resumed from its checkpoint (a run this one finished) did most of its work in an earlier job
    resumed = [m for m in DEMO["models"] if "resumed" in json.loads((run / "models" / m / "metrics.json").read_text())]
    if resumed:
        del compared["train"]
    # stages of start-ups mostly (under 30 CPU s in all: quicklooks, figures) spend up to twice as much on a
    # busy machine as on the idle one the rates were measured on: they count in the total
    large = {stage: round(b / m, 2) for stage, (b, m) in compared.items() if m >= 30}
    assert {"sample", "hpo", "predict", "assess"} <= set(large)
    machine = statistics.median(large.values())  # this machine against the one the rates were measured on
    assert all(0.5 <= ratio / machine <= 2 for ratio in large.values()), (machine, large)
    total = sum(b for b, _ in compared.values()) / sum(m for _, m in compared.values())
    assert 0.5 <= total <= 2, (total, large, resumed)


def test_lcflow_budget_from_this_run_s_own_rates_reproduces_its_stages(run, tmp_path):
    """--rates-from the run itself (a site's own measured run): each stage priced as this run's jobs spent
    it, so the budget of the run's config gives back every stage's CPU within 2x (a stage priced from a
    model's rate: its study from its trainings'), no machine factor; the rates name the run."""
    import os
    import subprocess
    import sys

    from lcflow import job_resources

    work = run.parent
    done = subprocess.run([str(Path(sys.executable).parent / "lcflow"), "budget", "--configfile",
                           str(work / "demo.yaml"), "--directory", str(work), "--profile", "local", "--rates-from",
                           str(run), "--json", str(tmp_path / "b.json")], capture_output=True, text=True,
                          timeout=300, env={k: v for k, v in os.environ.items() if not k.startswith("LCFLOW_SLURM_")})
    assert done.returncode == 0, done.stderr
    assert f"rates: the run at {run} for search, stage, " in done.stdout
    budgeted = json.loads((tmp_path / "b.json").read_text())["cpu_s_by_stage"]
    measured = job_resources.read(run / "benchmarks").groupby("stage")["cpu_s"].sum().to_dict()
    compared = {stage: (budgeted[stage], measured[stage]) for stage in budgeted if stage in measured}
    assert {"cube", "sample", "hpo", "train", "predict", "assess", "consistent_maps"} <= set(compared)
    if any("resumed" in json.loads((run / "models" / m / "metrics.json").read_text()) for m in DEMO["models"]):
        del compared["train"]  # a training resumed from a checkpoint did its work in an earlier job
    ratios = {stage: round(b / m, 2) for stage, (b, m) in compared.items() if m >= 5}
    assert all(0.5 <= r <= 2 for r in ratios.values()), ratios
    # the stages priced from the run's jobs alone come back as they ran
    assert all(abs(ratios[s] - 1) < 0.02 for s in ("cube", "sample", "predict", "assess") if s in ratios), ratios


def test_adding_a_year_to_the_demo_makes_only_that_year_s_data(run, tmp_path):
    """A year added to a finished demo: its scenes are made, searched and composited for each tile, and no
    other tile-year's (the models and maps change, as they learn from the new year's samples too)."""
    year = max(DEMO["years"]) + 1
    over = tmp_path / "year.yaml"
    over.write_text(yaml.safe_dump({"years": [*DEMO["years"], year]}))
    done = snakemake(run.parent, "-n", configfile=[run.parent / "demo.yaml", over], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = job_counts(done.stdout)
    tiles = len(DEMO["tiles"])
    assert counts["synth_scenes"] == counts["search"] == counts["stage"] == counts["cube"] == counts["sample"] == tiles, counts
    assert "synth_corine" not in counts and "labels" not in counts, counts
    for rule in ("synth_scenes", "search", "stage", "cube"):
        years = set(re.findall(rf"rule {rule}:.*?wildcards: tile=\w+, year=(\d+)", done.stdout, re.DOTALL))
        assert years == {str(year)}, (rule, years)


def test_readmes_rerun_works_from_a_shell_with_no_environment(run, tmp_path):
    """README's rerun command, typed where PATH holds only /usr/bin and /bin: the rules find lcflow (and the
    launchers) beside the snakemake that runs them. A launcher that cannot start stops the run before any
    job, in one line, and the model it was to retrain is left as it was."""
    import os
    import subprocess
    import sys

    work = tmp_path / "work"
    shutil.copytree(run.parent, work)
    results = work / HOSTILE_RESULTS
    bare = {"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    snakemake_bin = str(Path(sys.executable).parent / "snakemake")
    base = [snakemake_bin, "-s", str(ROOT / "Snakefile"), "-d", str(work), "--profile", str(ROOT / "profiles" / "local"),
            "--cores", "2", "--configfile", str(work / "demo.yaml")]
    curve = results / "models" / "lstm" / "learning_curve.png"
    before = curve.stat().st_mtime_ns
    done = subprocess.run([*base, "--forcerun", "learning_curve"], env=bare, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert job_counts(done.stdout + done.stderr) == {"learning_curve": 2, "job_resources": 1, "all": 1}
    assert curve.stat().st_mtime_ns > before
    model = {p: p.read_bytes() for p in (results / "models" / "lstm").iterdir()}
    stopped = subprocess.run([*base, "--forcerun", "train", "--set-resources", "train:launcher=no-such-launcher -np 2"],
                             env=bare, capture_output=True, text=True, timeout=600)
    assert stopped.returncode != 0
    assert _lcflow_lines(stopped) == [
        f"lcflow: no-such-launcher, which the profile starts the distributed jobs with, is neither beside "
        f"{sys.executable} nor on PATH: run snakemake where the site's launcher is (a Slurm login node, after `module "
        "load` of Slurm or MPI where the site asks for it), or name the launcher your site has (MPI in "
        "profiles/slurm/config.yaml, or LCFLOW_SLURM_MPI)"]
    assert {p: p.read_bytes() for p in (results / "models" / "lstm").iterdir()} == model


def test_a_map_is_assessed_without_a_truth_raster(run, tmp_path):
    """As on real data: the labelled reference sample and the test samples only. The table's truth columns
    stay empty; the agreement with the test samples is the share of test rows whose label the model's own
    map of that year (maps/raw, predicted window by window from the cube) holds at their pixels."""
    import subprocess
    import sys

    lcflow = str(Path(sys.executable).parent / "lcflow")
    name = "31UFT_2018_tempcnn"
    out = tmp_path / f"{name}.json"
    done = subprocess.run([lcflow, "assess", "--model-dir", str(run / "models" / "tempcnn"),
                           "--samples", str(run / "31UFT" / "2018" / "samples.parquet"), "--map", str(run / "maps" / f"{name}.tif"),
                           "--reference", str(run / "reference" / "31UFT_2018_labelled.gpkg"), "--level", "2",
                           "--out", str(out), "--figure", str(tmp_path / "cm.png"), "--areas-figure", str(tmp_path / "areas.png")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert "truth" not in result and result["reference"]["n_points"] > 100
    samples = pd.read_parquet(run / "31UFT" / "2018" / "samples.parquet")
    test = samples[samples["split"] == "test"]
    with rasterio.open(run / "maps" / "raw" / f"{name}.tif") as ds:
        mapped = ds.read(1)[test["row"].to_numpy(), test["col"].to_numpy()]
    assert result["test_samples"]["overall_accuracy"] == pytest.approx(float((mapped == test["label"].to_numpy()).mean()))
    table = tmp_path / "accuracy.tsv"
    summary = subprocess.run([lcflow, "summarize", "--assessments", str(out), "--out", str(table)],
                             capture_output=True, text=True, timeout=120)
    assert summary.returncode == 0, summary.stderr
    (row,) = list(csv.DictReader(table.open(), delimiter="\t"))
    assert row["map"] == name and row["truth_OA"] == "" and row["truth_kappa"] == ""
    assert float(row["reference_OA"]) == pytest.approx(result["reference"]["overall_accuracy"], abs=1e-4)
    assert float(row["test_agreement_OA"]) == pytest.approx(result["test_samples"]["overall_accuracy"], abs=1e-4)

def test_corine_polygons_and_a_change_layer_relabel_a_tile(run, tmp_path):
    """On a copy of the finished demo: CORINE as GeoPackage polygons (``Code_18`` as text) and a CLC change
    layer, in paths a shell would split; only the labels job reruns, and its raster is the raster path's
    labels except under the change."""
    import geopandas as gpd
    import shapely

    work = tmp_path / "work"
    shutil.copytree(run.parent, work)
    cfg = yaml.safe_load((work / "demo.yaml").read_text())
    polygons = f"{HOSTILE_RESOURCES}/clc 2018 $(x).gpkg"
    corine_polygons(work / cfg["labels"]["corine"]).to_file(work / polygons)
    labels_tif = work / HOSTILE_RESULTS / "31UFT" / "labels.tif"
    with rasterio.open(labels_tif) as ds:
        before, grid_bounds, nodata = ds.read(1), ds.bounds, ds.nodata
    x0, y1 = grid_bounds.left, grid_bounds.top
    change_box = shapely.box(x0 + 1000, y1 - 1500, x0 + 1500, y1 - 1000)  # cols 100-150, rows 100-150
    change = f"{HOSTILE_RESOURCES}/cha 2012-2018.gpkg"
    gpd.GeoDataFrame({"Code_18": ["211"]}, geometry=[change_box], crs="EPSG:32631").to_crs(3035).to_file(work / change)
    cfg["labels"].update(corine=polygons, change=change)
    (work / "vector.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True))
    done = snakemake(work, str(labels_tif.relative_to(work)), "--forcerun", "labels", configfile=work / "vector.yaml")
    assert done.returncode == 0, done.stderr[-4000:]
    assert job_counts(done.stdout + done.stderr) == {"labels": 1}
    assert not list(work.rglob("FILE"))
    with rasterio.open(labels_tif) as ds:
        after = ds.read(1)
        record = json.loads(ds.tags()["label_source"])
    assert record["format"] == "vector" and record["code_column"] == "Code_18"
    assert (after[100:150, 100:150] == nodata).all() and (before[100:150, 100:150] != nodata).all()
    outside = np.ones(after.shape, bool)
    outside[99:151, 99:151] = False
    assert float((after == before)[outside].mean()) >= 0.99
    assert record["change_layer"]["excluded_pixels"] == int(((after == nodata) & (before != nodata)).sum()) >= 2500


#: true once the page shows a decoded PNG (the report embeds its pictures as data URIs)
SHOWN_PNG = ("() => [...document.images].some(i => i.src.startsWith('data:image/png') && i.complete"
             " && i.naturalWidth > 0 && i.getClientRects().length > 0)")


def _show(page, report: Path, view: tuple, timeout_ms: int) -> bool:
    """Open ``report`` afresh and click through the menu to ``view``'s picture; whether it was shown."""
    from playwright import sync_api

    category, subcategory, row = view
    page.goto(report.as_uri())
    page.get_by_text(category, exact=True).click()
    if subcategory:
        page.get_by_text(subcategory, exact=True).click()
    page.locator("tr", has_text=row).locator("a[iconname=eye]").first.click()
    try:  # the picture is decoded when it is: a fixed 500 ms wait missed a learning curve on a loaded CI host
        page.wait_for_function(SHOWN_PNG, timeout=timeout_ms)
    except sync_api.TimeoutError:
        return False
    return True


def test_the_report_shows_its_pictures_in_a_browser(run, tmp_path):
    """The report as a user sees it: headless Chromium (Debian's) driven by Playwright opens it, and for a
    map, its class areas and a learning curve, clicking through the menu shows the picture, decoded at
    its full size. Screenshots are kept beside the report.

    A view whose picture has not shown after 30 s is opened once more, from the start, with a warning and a
    screenshot of what the page showed: once, on a loaded CI host, a view showed no picture for 30 s, where
    20 views in a row, beside a demo run on this host's 2 cores, each showed theirs in under 1 s (the cause
    is not known; the screenshot is there to find it)."""

    try:
        from playwright import sync_api
    except ImportError:
        missing("chromium", "playwright is not installed")
    browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser_path is None:
        missing("chromium", "chromium is not installed (Debian package chromium)")
    report = run / "report.html"
    if not report.exists():
        done = snakemake(run.parent, "--report", str(report), configfile=run.parent / "demo.yaml")
        assert done.returncode == 0, done.stderr[-2000:]
    views = [("Maps", "lstm", "31UFT", 1000), ("Class areas", "rf", "32ULC", 500), ("Training", None, "tempcnn", 600),
             ("Change", "tempcnn", "32ULC", 1000)]
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_path, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            for *view, min_width in views:
                name = view[0].replace(" ", "_").lower()
                if not _show(page, report, tuple(view), 30_000):
                    page.screenshot(path=str(run / f"report_{name}_not_shown.png"))
                    warnings.warn(f"report view {view}: no picture after 30 s (screenshot "
                                  f"report_{name}_not_shown.png); opened again", stacklevel=1)
                    assert _show(page, report, tuple(view), 60_000), f"report view {view}: no picture shown, twice"
                shown = [im.evaluate("e => [e.naturalWidth, e.complete, e.src.slice(0, 22)]")
                         for im in page.locator("img").all() if im.is_visible()]
                pictures = [s for s in shown if s[2].startswith("data:image/png") and s[1]]
                assert pictures and max(w for w, _, _ in pictures) >= min_width, (view, shown)
                page.screenshot(path=str(run / f"report_{name}.png"))
        finally:
            browser.close()


def _lcflow_lines(done) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("lcflow:")]


def test_the_demo_tunes_rf_and_lstm_and_trains_them_with_the_best_parameters(run):
    """The demo's studies (hpo in config/config.yaml): each model's best trial is summarised, and its final
    training took those parameters and says so."""
    space = DEMO["hpo"]["space"]
    for model in DEMO["hpo"]["models"]:
        best = yaml.safe_load((run / "hpo" / model / "best_params.yaml").read_text())
        assert set(best["params"]) == set(space[model]) and best["trials"]["complete"] >= 1
        assert best["trials"]["complete"] + best["trials"]["pruned"] == DEMO["hpo"]["trials"], best
        metrics = json.loads((run / "models" / model / "metrics.json").read_text())
        assert metrics["tuned"]["params"] == best["params"] and metrics["tuned"]["study"] == best["study"]
        assert all(metrics["params"][k] == v for k, v in best["params"].items())
        (worker,) = [json.loads(p.read_text()) for p in (run / "hpo" / model / "workers").glob("*.json")]
        # the forest's trials run in one process, the LSTM's under horovodrun on the profile's two ranks
        assert worker["world_size"] == (1 if model == "rf" else 2) and worker["study"] == best["study"]
        trials = pd.read_csv(run / "hpo" / model / "trials.csv")
        assert len(trials) == DEMO["hpo"]["trials"] and trials.loc[best["trial"], "value"] == best["value"]
        for name in ("optimisation_history.png", "param_importances.png", "intermediate_values.png"):
            assert (run / "hpo" / model / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    untuned = json.loads((run / "models" / "tempcnn" / "metrics.json").read_text())
    assert "tuned" not in untuned


def test_the_torch_backend_tunes_trains_and_maps_into_the_files_horovod_writes(run, tmp_path):
    """distributed.backend: torch on a copy of the finished demo: the LSTM's study, its final training and
    a map again, each under torchrun on two ranks (prediction too), into the same files as Horovod wrote."""
    work = tmp_path / "work"
    shutil.copytree(run.parent, work)
    results = work / HOSTILE_RESULTS
    horovod = {d: sorted(p.name for p in (results / d).iterdir()) for d in ("hpo/lstm", "models/lstm")}
    shutil.rmtree(results / "hpo" / "lstm")  # a new study, not the finished one continued
    overlay = tmp_path / "torch.yaml"
    # a short study and training of a narrower LSTM: what is tested is where they run and what they write,
    # not how well
    overlay.write_text("distributed: {backend: torch}\nhpo: {trials: 2}\n"
                       "model_params: {lstm: {epochs: 3, min_steps: 0, evaluations: 3, hidden_size: 16}}\n")
    tile, years = DEMO["tiles"][0], DEMO["years"]
    # --set-resources replaces the profile's: train and hpo are given their two ranks again
    ranks = ["train:ranks=2", "train:threads_per_rank=1", "hpo:ranks=2", "hpo:threads_per_rank=1", "predict:ranks=2"]
    # the study is forced (a map that is up to date would leave its removed products missing); mtime triggers
    # keep what does not follow from it
    done = snakemake(work, f"{HOSTILE_RESULTS}/maps/raw/{tile}_{years[-1]}_lstm.tif", "--set-resources", *ranks,
                     "--forcerun", "hpo", "--rerun-triggers", "mtime", configfile=[work / "demo.yaml", overlay])
    assert done.returncode == 0, done.stderr[-4000:]
    said = done.stdout + done.stderr
    assert job_counts(said) == {"hpo": 1, "hpo_summary": 1, "train": 1, "predict": 1}
    assert said.count("torchrun --standalone --nnodes=1 --nproc-per-node=2 --no-python lcflow") == 3
    assert {d: sorted(p.name for p in (results / d).iterdir()) for d in horovod} == horovod
    worker = json.loads((results / "hpo" / "lstm" / "workers" / "0.json").read_text())
    assert worker["world_size"] == 2
    metrics = json.loads((results / "models" / "lstm" / "metrics.json").read_text())
    assert metrics["launcher"] == "torch" and metrics["world_size"] == 2
    assert metrics["tuned"]["study"] == worker["study"]
    train_log = (results / "logs" / "train" / "lstm.log").read_text()
    sums = dict(re.findall(r"rank=(\d) size=2 final weights sha256=(\w+)", train_log))
    assert set(sums) == {"0", "1"} and sums["0"] == sums["1"], train_log[-2000:]
    # the best trial trained the final model under torchrun: the final training took its ended run
    assert metrics["resumed"]["finished_before"] and "round=1 rank=" not in train_log
    trial_log = (results / "logs" / "hpo" / "lstm_0.log").read_text()
    assert sums["0"] in re.findall(r"rank=0 size=2 final weights sha256=(\w+)", trial_log)
    log = (results / "logs" / "predict" / f"{tile}_{years[-1]}_lstm.log").read_text()
    assert len(re.findall(r"rank (\d) of 2 \(local rank \d\): windows", log)) == 2, log[-2000:]


def test_a_labelled_reference_survives_retraining_and_a_new_year(run, tmp_path):
    """A user labels a copy of 31UFT 2018's design outside the results and points assess.reference at it:
    retraining the forest (which redraws the design from its new map) leaves the labelled file byte for
    byte as it was, and accuracy.tsv quotes its points; the tile-years not labelled yet say so. Adding a
    year plans no job that writes it."""
    import hashlib
    import subprocess
    import sys

    work = tmp_path / "work"
    shutil.copytree(run.parent, work, symlinks=True)
    results = work / HOSTILE_RESULTS
    labelled = work / "labelled" / "31UFT_2018.gpkg"
    labelled.parent.mkdir()
    lcflow = str(Path(sys.executable).parent / "lcflow")
    done = subprocess.run([lcflow, "label-reference", "--points", str(results / "reference" / "31UFT_2018_design.gpkg"),
                           "--truth", str(work / HOSTILE_RESOURCES / "truth" / "31UFT_2018.tif"), "--level", "2",
                           "--out", str(labelled)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    digest = hashlib.sha256(labelled.read_bytes()).hexdigest()
    over = work / "labelled.yaml"
    over.write_text(yaml.safe_dump({"assess": {"reference": "labelled/{tile}_{year}.gpkg"}}))
    configs = [work / "demo.yaml", over]
    # the forest retrained and what accuracy.tsv is made from (not the figures, STAC items and tables beside
    # it, which the other tests make): the designs drawn again from its new maps, every map assessed again
    forced = snakemake(work, "--forcerun", "train_rf", f"{HOSTILE_RESULTS}/accuracy.tsv", configfile=configs,
                       timeout=1200)
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert "no labelled file yet for 31UFT 2019, 32ULC 2018, 32ULC 2019" in forced.stderr
    counts = job_counts(forced.stdout + forced.stderr)
    assert counts["train_rf"] == 1 and counts["design_sample"] == len(DEMO["tiles"]) * len(DEMO["years"])
    assert hashlib.sha256(labelled.read_bytes()).hexdigest() == digest
    rows = {r["map"]: r for r in csv.DictReader((results / "accuracy.tsv").open(), delimiter="\t")}
    points = json.loads((results / "assessment" / "31UFT_2018_rf.json").read_text())["reference"]
    assert points["reference"] == "labelled/31UFT_2018.gpkg" and points["points_used"] > 100
    for model in DEMO["models"]:
        assert rows[f"31UFT_2018_{model}"]["quote"].endswith(f"(reference sample of {points['points_used']} points, 95 % CI)")
        assert rows[f"32ULC_2018_{model}"]["quote"].startswith("none: no reference sample")
    year = yaml.safe_dump({"years": [*DEMO["years"], max(DEMO["years"]) + 1]})
    (work / "year.yaml").write_text(year)
    planned = snakemake(work, "-n", "-p", configfile=[*configs, work / "year.yaml"], timeout=600)
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert job_counts(planned.stdout)["cube"] == len(DEMO["tiles"])
    assert not [out for out in re.findall(r"output: (.*)", planned.stdout) if "labelled" in out]
    assert hashlib.sha256(labelled.read_bytes()).hexdigest() == digest


def test_every_file_a_run_keeps_is_a_target_of_a_plain_run(run):
    """Every output of the demo's DAG but the temporary ones is an input of rule all: one that a failed or
    cancelled job left missing is then made again by a plain rerun (tests/slurm: a failed submission)."""
    workdir, config = run.parent, run.parent / "demo.yaml"
    summary = snakemake(workdir, "--summary", configfile=config, timeout=600)
    assert summary.returncode == 0, summary.stderr[-3000:]
    rows = [line.split("\t") for line in summary.stdout.splitlines() if "\t" in line][1:]
    kept = {row[0] for row in rows if row[4] != "removed temp file"}
    assert len(kept) > 200 and {row[0] for row in rows} - kept  # the probabilities are temporary
    planned = snakemake(workdir, "-n", "--forceall", configfile=config, timeout=600)
    targets = re.search(r"rule all:\n    input: (.*)\n", planned.stdout).group(1).split(", ")
    assert sorted(kept - set(targets)) == []


def _legends(tif: Path) -> tuple[dict[int, str], dict[int, str]]:
    """The class names GDAL reads from a raster's .aux.xml (category index = class code) and QGIS from its
    .qml (label "code name"), the empty categories left out."""
    import xml.etree.ElementTree as ET

    pam = ET.parse(tif.with_name(tif.name + ".aux.xml")).getroot().findall(".//CategoryNames/Category")
    gdal = {i: c.text for i, c in enumerate(pam) if c.text}
    palette = ET.parse(tif.with_suffix(".qml")).getroot().findall(".//paletteEntry")
    return gdal, {int(e.get("value")): e.get("label").split(" ", 1)[1] for e in palette}


def test_consistent_maps_labels_and_the_demo_truth_carry_their_legend_for_gdal_and_qgis(run):
    """Beside predict's maps (tests/maps), the consistent maps, the label rasters and the demo's truth:
    GDAL's categories and QGIS's palette name every class the raster's nomenclature has, the same way."""
    level2 = nomenclature.clc_level(2).names
    tile, year = DEMO["tiles"][0], DEMO["years"][0]
    cases = {run / "maps" / f"{tile}_{year}_lstm.tif": None, run / f"{tile}" / "labels.tif": None,
             run.parent / HOSTILE_RESOURCES / "truth" / f"{tile}_{year}.tif": nomenclature.clc_level(3).names}
    for tif, expected in cases.items():
        if expected is None:  # a map or the labels: the classes named in its tags, CLC level 2's names
            with rasterio.open(tif) as ds:
                expected = {int(k): v for k, v in json.loads(ds.tags()["class_names"]).items()}
            assert expected and all(level2[c] == name for c, name in expected.items()), (tif, expected)
        gdal, qgis = _legends(tif)
        assert gdal == qgis, tif
        assert set(expected) <= set(gdal) and all(gdal[c] == expected[c] for c in expected), (tif, gdal)
        with rasterio.open(tif) as ds:
            present = set(np.unique(ds.read(1)).tolist()) - {ds.nodata}
        assert present <= set(gdal), (tif, present - set(gdal))  # every class on the raster is named
