"""A trained model scored on a samples table: the test rows of a training or a blend, ``lcflow evaluate``,
and an assessment's held-out samples. Apart from training so that scoring a forest never imports torch."""

import numpy as np

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
