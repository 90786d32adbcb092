"""Label checks of the samples: noise cleaning (out-of-fold forest) and label transfer (change test)."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import rasterio
from sklearn.ensemble import RandomForestClassifier

from lcflow.labels import cleaning as label_noise
from lcflow.labels import nomenclature, sampling
from lcflow.labels import transfer as label_transfer
from lcflow.labels.cleaning import Cleaning
from lcflow.labels.sample_settings import CleanSettings, SampleSettings
from lcflow.labels.transfer import ChangeTest


def _judging(min_label_probability: float, **settings) -> Cleaning:
    """Cleaning at ``min_label_probability`` (0: off), other ``sample.clean`` keys as given, else their defaults."""
    return Cleaning(CleanSettings(min_label_probability=min_label_probability, **settings))

def blocky_table(rng: np.random.Generator, n_blocks: int = 40, per_block: int = 25, flipped_blocks: int = 4):
    """Two classes of distinct series; whole blocks (a mislabelled CORINE polygon) carry the wrong label."""
    x, y, truth, groups = [], [], [], []
    for b in range(n_blocks):
        c = b % 2
        centre = np.where(c, 1.0, -1.0)
        x.append(centre + rng.normal(0, 0.6, (per_block, 8)))
        truth += [c] * per_block
        y += [1 - c if b < flipped_blocks else c] * per_block
        groups += [b] * per_block
    return np.concatenate(x), np.array(y), np.array(truth), np.array(groups)


def test_cleaning_drops_mislabelled_blocks_and_keeps_the_rest():
    rng = np.random.default_rng(0)
    x, y, truth, groups = blocky_table(rng)
    drop = label_noise.noisy(x, y, groups, _judging(0.4, trees=50), "t")
    wrong = y != truth
    assert drop[wrong].mean() > 0.9  # a whole mislabelled block cannot vouch for itself
    assert drop[~wrong].mean() < 0.05
    assert not label_noise.noisy(x, y, groups, _judging(0.0), "t").any()  # 0 turns it off


def test_cleaning_never_empties_a_class_and_says_so(caplog):
    rng = np.random.default_rng(1)
    x, y, truth, groups = blocky_table(rng)
    y = np.where(groups < 10, 2, y)  # a rare class on blocks whose series belong to the others
    drop = label_noise.noisy(x, y, groups, _judging(0.4, max_drop_fraction=0.3, trees=50), "tile T 2019")
    rare = y == 2
    assert drop[rare].sum() == int(np.floor(0.3 * rare.sum()))
    assert "tile T 2019: class 2" in caplog.text and "max_drop_fraction" in caplog.text


class _Recorded(RandomForestClassifier):
    """scikit-learn's forest, each fitted one and the rows it was given kept."""

    fitted: list = []

    def fit(self, x, y, **kw):
        _Recorded.fitted.append((self, len(x)))
        return super().fit(x, y, **kw)


def test_cleanings_trees_grow_on_at_most_tree_rows_and_still_find_the_mislabelled_blocks(monkeypatch):
    """Over ``tree_rows`` a fold's every tree grows on that many of its rows (its root weighs them), which
    bounds a large tile-year's time and memory; under it, every tree on a bootstrap of all of them, the
    drop to the bit the one of no cap."""
    # 4,000 rows: each fold's forest sees 3,200, over the schema's least cap (1,000)
    x, y, truth, groups = blocky_table(np.random.default_rng(0), per_block=100)
    monkeypatch.setattr(label_noise, "RandomForestClassifier", _Recorded)
    drops = {}
    for cap in (None, 5000, 1000):
        _Recorded.fitted = []
        drops[cap] = label_noise.noisy(x, y, groups, _judging(0.4, trees=30, tree_rows=cap), "t")
        rows = [n for _, n in _Recorded.fitted]
        assert len(rows) == 5 and all(n == 3200 for n in rows)
        roots = {e.tree_.weighted_n_node_samples[0] for f, _ in _Recorded.fitted for e in f.estimators_}
        assert roots == ({3200} if cap != 1000 else {1000})
    np.testing.assert_array_equal(drops[5000], drops[None])
    wrong = y != truth
    assert drops[1000][wrong].mean() > 0.9 and drops[1000][~wrong].mean() < 0.05


def test_the_sample_command_gives_cleaning_its_tree_row_cap(monkeypatch, tmp_path):
    """``--clean-tree-rows`` reaches the cleaning (``none``: no cap), over the rule's ``--settings``; without
    either, the schema's default."""
    from lcflow import cli
    from lcflow.defaults import default

    seen = []
    monkeypatch.setattr(sampling, "run", lambda *a, **kw: seen.append(a[4].clean) or pd.DataFrame({"split": []}))
    base = ["sample", "--cube", "c.tif", "--valid", "v.tif", "--labels", "l.tif", "--tile", "31UFT", "--year", "2018",
            "--out", str(tmp_path / "s.parquet")]
    assert cli.main(base) == 0 and seen[-1].tree_rows == default("sample.clean.tree_rows") == 25000
    assert cli.main(base + ["--clean-tree-rows", "none"]) == 0 and seen[-1].tree_rows is None
    assert cli.main(base + ["--clean-tree-rows", "4000"]) == 0 and seen[-1].tree_rows == 4000
    assert cli.main(base + ["--settings", '{"clean": {"tree_rows": 5000, "trees": 50}}']) == 0
    assert (seen[-1].tree_rows, seen[-1].trees) == (5000, 50)
    assert cli.main(base + ["--settings", '{"clean": {"tree_rows": 5000}}', "--clean-tree-rows", "6000"]) == 0
    assert seen[-1].tree_rows == 6000 and seen[-1].trees == default("sample.clean.trees")
    assert cli.main(base + ["--clean-tree-rows", "-1"]) == 2 and len(seen) == 5


def test_cleaning_is_skipped_with_one_block(caplog):
    x, y, _, _ = blocky_table(np.random.default_rng(2))
    assert not label_noise.noisy(x, y, np.zeros(len(y)), _judging(0.4), "tile T 2018").any()
    assert "tile T 2018: label cleaning skipped (1 spatial block(s)" in caplog.text


def test_change_test_flags_changed_pixels_per_class():
    rng = np.random.default_rng(3)
    n, steps, bands = 400, 12, 3
    season = np.sin(np.linspace(0, np.pi, steps))[None, :, None]
    labels = np.repeat([1, 2], n // 2)
    amplitude = np.where(labels == 1, 3000.0, 500.0)[:, None, None]  # class 2 varies little between years
    reference = 1000 + amplitude * season + rng.normal(0, 100, (n, steps, bands))
    target = reference + rng.normal(0, 100, (n, steps, bands))
    moved = np.zeros(n, dtype=bool)
    moved[::20] = True  # 5 %: a forest cut, a field turned into a building
    target[moved] = 4000 - amplitude[moved] * season
    target[1, :, :] = np.nan  # never observed in the target year: cannot be tested
    distance = label_transfer.series_distance(target.astype(np.float32), reference.astype(np.float32))
    assert np.isnan(distance[1]) and np.isfinite(np.delete(distance, 1)).all()
    flagged = label_transfer.changed(distance, labels, ChangeTest(3))
    assert flagged[moved].all()
    assert flagged[~moved].mean() < 0.03 and flagged[1]
    assert not label_transfer.changed(distance, labels, ChangeTest(0)).any()


def test_demo_samples_get_truer_labels_and_lose_the_changed_pixels(stages, demo, tmp_path):
    """On the small demo: the checks raise the share of train/val labels that equal the truth, and keep
    most planted changes out of the second year; test rows stay as drawn."""
    level2 = nomenclature.clc_level(2)
    truth = {}
    for year in (2018, 2019):
        with rasterio.open(demo / "truth" / f"31UFT_{year}.tif") as src:
            truth[year] = level2.apply(src.read(1))
    planted = truth[2018] != truth[2019]
    figures = {}
    for year in (2018, 2019):
        out = tmp_path / f"{year}.parquet"
        settings = SampleSettings(per_class=300, min_valid_fraction=0.4, boundary_px=1, block_px=16, min_per_class=0,
                                  clean={"min_label_probability": 0.4, "trees": 100}, transfer={"mad_k": 3})
        frame = sampling.run(stages[f"cube{year}"], stages[f"valid{year}"], stages["labels"], out, settings,
                             tile="31UFT", year=year, reference_cube=stages["cube2018"] if year == 2019 else None)
        before = pd.read_parquet(stages[f"samples{year}"])
        judged = [f[f["split"].isin(["train", "val"])] for f in (before, frame)]
        true_share = [float((f["label"].to_numpy() == truth[year][f["row"], f["col"]]).mean()) for f in judged]
        changed = [int(planted[f["row"], f["col"]].sum()) for f in judged]
        figures[year] = (true_share, changed)
        meta = json.loads(pq.read_schema(out).metadata[b"lcflow"])["label_checks"]
        assert [c["check"] for c in meta["applied"]] == (["change since the reference year"] if year == 2019 else []) + [
            "out-of-fold label probability"]
        assert sum(c.get("noisy", 0) for c in meta["per_class"].values()) > 0
        assert sum(c["kept"] for c in meta["per_class"].values()) == len(frame)
        assert frame.groupby("label").size().max() <= 300
    print("train/val labels equal to truth, before -> after; planted changes in them:", figures)
    for year, (share, _) in figures.items():
        assert share[1] >= share[0] + 0.1, (year, share)  # the full demo reaches 0.93 (test_workflow)
    before_changed, after_changed = figures[2019][1]
    assert before_changed >= 10 and after_changed <= 0.2 * before_changed, figures[2019]


def test_the_cleaning_record_keeps_the_order_samples_tables_have_it_in():
    """A samples table's metadata records the cleaning; its bytes name the HPO study trained on it, so the
    record's keys keep their order whatever the settings' field order; every ``sample.clean`` key is in it."""
    record = _judging(0.5, trees=40).record()
    assert list(record) == ["min_label_probability", "folds", "max_drop_fraction", "trees", "seed", "reference_data",
                            "tree_rows"]
    assert record["min_label_probability"] == 0.5 and record["trees"] == 40
    assert set(record) - {"seed"} == {f.name for f in dataclasses.fields(CleanSettings)}
    assert Cleaning(CleanSettings(), seed=7).record()["seed"] == 7 and not _judging(0.5).off().enabled
