"""A trained model scored on a samples table: the test rows of a training, ``lcflow evaluate``, and an
assessment's held-out samples. Apart from training so that scoring a forest never imports torch."""

import json
from pathlib import Path

import numpy as np

from lcflow.common.atomic import write_text
from lcflow.common.metrics import scores
from lcflow.errors import LcflowError
from lcflow.labels import samples_table
from lcflow.train.model_dir import TrainedModel


def evaluate_table(trained: TrainedModel, table: samples_table.SampleTable) -> dict:
    """Scores of a trained model on every row of ``table``; rows without any observation count as wrong."""
    missing = [b for b in trained.bands if b not in table.bands]
    if missing or table.steps < trained.steps:
        raise LcflowError(f"samples table lacks what the model needs: bands {missing or trained.bands}, "
                          f"{trained.steps} time steps (table has {table.bands}, {table.steps} steps)")
    if trained.model.input_kind == "patch":
        x = table.patches(trained.bands, trained.steps)
    else:
        x = table.features(trained.bands, trained.steps)
    codes, _, empty = trained.predict(x, table.latlon() if trained.model.uses_position else None)
    codes = np.where(empty, -1, codes)
    result = scores(table.frame["label"].to_numpy(), codes, trained.class_names)
    result["n_without_observation"] = int(empty.sum())
    return result


def evaluate(model_dir: str | Path, sample_paths: list[str], out: str | Path) -> dict:
    """``lcflow evaluate``: scores on the test split (or the whole table without a split column)."""
    trained = TrainedModel.load(model_dir)
    table = samples_table.read(sample_paths)
    part = table.split("test") if "split" in table.frame.columns else table
    if len(part.frame) == 0:
        raise LcflowError(f"samples table(s) {', '.join(map(str, sample_paths))}: no 'test' rows to evaluate")
    result = {"model_dir": str(model_dir), "split": "test" if part is not table else "all", **evaluate_table(trained, part)}
    write_text(out, json.dumps(result, indent=1))
    return result
