"""A trained model scored on a samples table: the test rows of a training or a blend, ``lcflow evaluate``,
and an assessment's held-out samples. Apart from training so that scoring a forest never imports torch."""

import logging

import numpy as np

from lcflow.common import evidence
from lcflow.common.metrics import scores
from lcflow.errors import LcflowError
from lcflow.labels import samples_table
from lcflow.train.model_dirs.model_dir import TrainedModel

log = logging.getLogger("lcflow.train.model_dirs.evaluation")


def evaluate_table(
    trained: TrainedModel, table: samples_table.SampleTable, source: str = "the samples table"
) -> dict:
    """Scores of a trained model on every row of ``table`` (``source`` names it in messages).

    Rows without any observation, and rows of classes the model does not know, count as wrong, and the
    log says how many; a table with no observation at all, or with none of the model's classes, is refused.
    Too few rows or classes to back a figure (:mod:`lcflow.common.evidence`): a WARNING naming ``source``,
    and a record of the counts and the reason in place of the scores.
    """
    missing = [b for b in trained.bands if b not in table.bands]
    if missing or table.steps < trained.steps:
        raise LcflowError(
            f"samples table lacks what the model needs: bands {missing or trained.bands}, "
            f"{trained.steps} time steps (table has {table.bands}, {table.steps} steps)"
        )
    labels = table.frame["label"].to_numpy()
    short = evidence.shortfall(labels, "rows")
    if short:
        return evidence.withheld(
            short, source, n_samples=int(labels.size), n_classes=int(np.unique(labels).size)
        )
    known = np.isin(labels, trained.classes)
    if not known.any():
        raise LcflowError(
            f"{source}: none of its classes ({_codes(labels)}) is a class of the model "
            f"({_codes(trained.classes)}): score it with a model trained on its classes"
        )
    if not known.all():
        unknown = labels[~known]
        log.warning(
            "%s: %d of %d rows are of classes the model does not know (%s), and count as wrong",
            source,
            len(unknown),
            len(labels),
            _codes(unknown, counts=True),
        )
    observed = table.observed()
    if not observed.any():
        raise LcflowError(
            f"{source}: none of its {len(labels)} rows holds an observation (every band value is "
            "missing): nothing to score"
        )
    if not observed.all():
        log.warning(
            "%s: %d of %d rows have no observation at all, and count as wrong",
            source,
            int((~observed).sum()),
            len(labels),
        )
    if trained.model.input_kind == "patch":
        x = table.patches(trained.bands, trained.steps)
    else:
        x = table.features(trained.bands, trained.steps)
    codes, _, empty = trained.predict(x, table.latlon() if trained.model.uses_position else None)
    codes = np.where(empty, -1, codes)
    result = scores(table.frame["label"].to_numpy(), codes, trained.class_names)
    result["n_without_observation"] = int(empty.sum())
    result["n_unknown_class"] = int((~known).sum())
    return result


def _codes(values, counts: bool = False) -> str:
    """Class codes for a message, in order: ``11, 21`` or, with ``counts``, ``11 (3 rows), 21 (1 row)``."""
    found, n = np.unique(np.asarray(values), return_counts=True)
    if not counts:
        return ", ".join(str(int(v)) for v in found)
    return ", ".join(f"{int(v)} ({k} row{'s' if k > 1 else ''})" for v, k in zip(found, n))
