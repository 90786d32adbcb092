"""benchmarks/studies/recipe_grid.py's summary: the figures docs/benchmarks.md quotes from it (a recipe against lcflow's forest,
fold by fold) computed from the fits, for a grid on every case and for one on the real tables alone."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def recipe_grid():
    spec = importlib.util.spec_from_file_location("recipe_grid", ROOT / "benchmarks" / "studies" / "recipe_grid.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_rows(path: Path, rows: list[dict], header: str = "# a header, which a results file may have\n") -> Path:
    path.write_text(header + "".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_summary_pairs_each_recipe_with_the_forest_fold_by_fold(recipe_grid, tmp_path, capsys):
    forest = [{"recipe": "forest", "model": "rf", "case": "slovenia_500_0", "fold": f, "oa": oa}
              for f, oa in enumerate([0.80, 0.90])]
    forest += [{"recipe": "forest", "model": "rf", "case": "demo_31UFT_2018_0", "fold": f, "oa": oa, "truth": t}
               for f, (oa, t) in enumerate([(0.90, 0.70), (0.80, 0.80)])]
    write_rows(tmp_path / "forest.jsonl", forest, header="")
    fits = [{"recipe": "a", "model": "lstm", "case": "slovenia_500_0", "fold": f, "oa": oa}
            for f, oa in enumerate([0.82, 0.86])]
    fits += [{"recipe": "a", "model": "lstm", "case": "demo_31UFT_2018_0", "fold": f, "oa": oa, "truth": t}
             for f, (oa, t) in enumerate([(0.94, 0.80), (0.84, 0.90)])]
    real_only = [{"recipe": "b", "model": "presto", "case": "slovenia_500_0", "fold": f, "oa": oa}
                 for f, oa in enumerate([0.70, 0.90])]
    recipe_grid.summary(tmp_path, [write_rows(tmp_path / "a.jsonl", fits)], [])
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("a "))
    # case means 0.840 and 0.890; differences +0.02, -0.04, +0.04, +0.04: mean +0.015, s.e. 0.019;
    # worst case -0.010 (Slovenia); against the truth +0.10 on both demo folds
    assert line.split()[1:] == ["4", "0.840", "0.890", "0.865", "+0.015", "+-", "0.019", "-0.010", "+0.100"]
    # a grid on the real tables alone has no true classes: its truth column is a dash
    recipe_grid.summary(tmp_path, [write_rows(tmp_path / "b.jsonl", real_only)], [])
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("b "))
    assert line.split()[1:] == ["2", "0.800", "-", "0.800", "-0.050", "+-", "0.050", "-0.050", "-"]


def test_a_cleaned_fold_loses_training_rows_that_contradict_their_label_and_keeps_its_test_rows(recipe_grid):
    """``prepare --clean``: the training rows that label cleaning judges mislabelled go, the test rows stay."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 400
    label = rng.choice([21, 31], n)
    cols = {"label": label.copy(), "x": 10.0 * rng.integers(0, 400, n), "y": 10.0 * rng.integers(0, 400, n),
            "split": np.where(np.arange(n) < 300, "train", "test")}
    for k in range(4):
        cols[f"B08_t{k:02d}"] = np.where(label == 21, 3000.0, 1000.0) + rng.normal(0, 100, n)
    flipped = np.arange(0, 300, 15)  # 20 training rows labelled with the other class
    cols["label"][flipped] = np.where(label[flipped] == 21, 31, 21)
    test_flipped = np.arange(300, 400, 10)  # and 10 test rows: cleaning must leave them
    cols["label"][test_flipped] = np.where(label[test_flipped] == 21, 31, 21)
    table = pd.DataFrame(cols)
    out = recipe_grid.cleaned(table, "fold 0")
    dropped = set(table.index) - set(out.index)
    # every flipped row goes; a fully grown forest may doubt a clean row beside a flipped one, too
    assert set(flipped) <= dropped and len(dropped) <= len(flipped) + 3
    pd.testing.assert_frame_equal(out[out["split"] == "test"], table[table["split"] == "test"])
