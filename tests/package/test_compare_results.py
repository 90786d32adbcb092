"""tests/compare_results.py, which shows a refactor changed no product: equal products pass whatever their
run-specific columns and keys, a changed pixel, value or key fails, and new files are listed apart."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import rasterio
from rasterio.transform import from_origin

from .. import compare_results
from ..conftest import ROOT


def write_results(root: Path, *, pixel: int = 3, train_s: float = 1.0, kappa: float = 0.5, sha: str = "a",
                  accuracy: float = 0.9, compression: str = "deflate") -> Path:
    """A small results folder: a map, a table with a timing column, a model.json, a log."""
    (root / "maps").mkdir(parents=True)
    (root / "models" / "rf").mkdir(parents=True)
    (root / "logs").mkdir()
    data = np.full((1, 4, 4), 11, dtype="uint8")
    data[0, 1, 2] = pixel
    with rasterio.open(root / "maps" / "m.tif", "w", driver="GTiff", width=4, height=4, count=1, dtype="uint8",
                       crs="EPSG:32631", transform=from_origin(600000, 5800000, 10, 10), compress=compression) as out:
        out.write(data)
    pd.DataFrame({"model": ["rf"], "kappa": [kappa], "train_s": [train_s]}).to_csv(
        root / "accuracy.tsv", sep="\t", index=False)
    (root / "models" / "rf" / "model.json").write_text(json.dumps(
        {"metrics": {"overall_accuracy": accuracy, "seconds": train_s}, "weights": {"sha256": sha}}))
    (root / "logs" / "rf.log").write_text(f"took {train_s} s\n")
    return root


def test_equal_products_are_identical_whatever_the_run_s_times_checksums_and_compression(tmp_path):
    old = write_results(tmp_path / "old")
    new = write_results(tmp_path / "new", train_s=9.0, sha="b", compression="zstd")
    outcome = compare_results.compare(old, new)
    assert outcome["different"] == []
    assert sorted(outcome["identical"]) == ["accuracy.tsv", "maps/m.tif", "models/rf/model.json"]


def test_a_changed_pixel_value_or_metric_is_named(tmp_path):
    old = write_results(tmp_path / "old")
    new = write_results(tmp_path / "new", pixel=4, kappa=0.6, accuracy=0.8)
    assert compare_results.compare(old, new)["different"] == ["accuracy.tsv", "maps/m.tif", "models/rf/model.json"]


def test_new_files_and_columns_are_new_products_not_changes(tmp_path):
    old = write_results(tmp_path / "old")
    new = write_results(tmp_path / "new")
    frame = pd.read_csv(new / "accuracy.tsv", sep="\t").assign(quote="OA 0.9")
    frame.to_csv(new / "accuracy.tsv", sep="\t", index=False)
    (new / "changes.tsv").write_text("series\tchanged\n31UFT_rf\t0.1\n")
    outcome = compare_results.compare(old, new)
    assert outcome["different"] == [] and outcome["only_new"] == ["changes.tsv"] and outcome["only_old"] == []


def test_the_command_exits_1_on_a_difference_and_names_the_file(tmp_path):
    old = write_results(tmp_path / "old")
    same = write_results(tmp_path / "same")
    changed = write_results(tmp_path / "changed", pixel=5)
    run = [sys.executable, "-m", "tests.compare_results"]
    done = subprocess.run([*run, str(old), str(same)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("3 products both have: 3 identical, 0 different")
    done = subprocess.run([*run, str(old), str(changed)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 1 and "different: maps/m.tif" in done.stdout
