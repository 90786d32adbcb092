"""Model directories as users hand them to lcflow: loaded whatever wrote them (``lcflow train`` one model,
``lcflow blend`` the mean of several), and scored on a samples table (``lcflow evaluate``)."""

import json
from pathlib import Path

from lcflow.common.atomic import write_text
from lcflow.errors import LcflowError
from lcflow.train.model_dirs import blend
from lcflow.train.model_dirs.model_dir import META_FILE, TrainedModel


def load(directory: str | Path) -> TrainedModel:
    """The model in ``directory``: a blend (:mod:`lcflow.train.model_dirs.blend`) with its members, or a trained model."""
    meta_path = Path(directory) / META_FILE
    if meta_path.is_file():
        try:
            kind = json.loads(meta_path.read_text()).get("model")
        except (json.JSONDecodeError, AttributeError, UnicodeDecodeError):
            kind = None  # TrainedModel.load names what is wrong with it
        if kind == blend.NAME:
            return blend.load(directory)
    return TrainedModel.load(directory)


def evaluate(model_dir: str | Path, sample_paths: list[str], out: str | Path) -> dict:
    """``lcflow evaluate``: scores on the test split (or the whole table without a split column)."""
    # pandas: scoring reads a table; a map job only loads the model
    from lcflow.labels import samples_table
    from lcflow.train.model_dirs.evaluation import evaluate_table

    trained = load(model_dir)
    table = samples_table.read(sample_paths)
    part = table.split("test") if "split" in table.frame.columns else table
    if len(part.frame) == 0:
        raise LcflowError(
            f"samples table(s) {', '.join(map(str, sample_paths))}: no 'test' rows to evaluate"
        )
    source = (
        f"{'the test rows of ' if part is not table else ''}{', '.join(map(str, sample_paths))}"
    )
    result = {
        "model_dir": str(model_dir),
        "split": "test" if part is not table else "all",
        **evaluate_table(trained, part, source),
    }
    write_text(out, json.dumps(result, indent=1))
    return result
