"""A trained model directory: weights plus everything needed to apply them to new data.

``model.json`` records the bands, time steps, classes (codes, names, colours), the standardisation
and the parameters, so predicting on a cube or evaluating on a table needs nothing else.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .atomic import write_text
from .errors import LcflowError
from .features import Standardiser, prepare
from .models import Model, model_class

META_FILE = "model.json"


@dataclass
class TrainedModel:
    model: Model
    bands: list[str]
    steps: int
    classes: list[int]
    class_names: dict[int, str]
    class_colors: dict[int, tuple[int, int, int]]
    standardise: Standardiser
    time_steps: list[str] | None = None

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(samples, steps, bands) raw values -> class codes, confidence 0..1, and which had no data."""
        if x.shape[1:] != (self.steps, len(self.bands)):
            raise LcflowError(f"input has {x.shape[1]} steps x {x.shape[2]} bands; the model expects "
                              f"{self.steps} x {len(self.bands)} ({', '.join(self.bands)})")
        prepared, empty = prepare(x, self.standardise)
        proba = self.model.predict_proba(prepared)
        best = proba.argmax(axis=1)
        return np.asarray(self.classes)[best], proba.max(axis=1), empty

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save(directory)
        meta = {"model": self.model.name, "params": self.model.params, "bands": self.bands, "steps": self.steps,
                "classes": self.classes, "class_names": {str(k): v for k, v in self.class_names.items()},
                "class_colors": {str(k): list(v) for k, v in self.class_colors.items()},
                "standardisation": self.standardise.to_dict(), "time_steps": self.time_steps}
        write_text(directory / META_FILE, json.dumps(meta, indent=1))

    @classmethod
    def load(cls, directory: str | Path) -> "TrainedModel":
        directory = Path(directory)
        meta_path = directory / META_FILE
        if not meta_path.exists():
            raise LcflowError(f"{directory} is not a trained model directory (no {META_FILE})")
        meta: dict[str, Any] = json.loads(meta_path.read_text())
        model = model_class(meta["model"])(meta["params"], len(meta["bands"]) + 1, meta["steps"], len(meta["classes"]))
        model.load_weights(directory)
        return cls(model, meta["bands"], meta["steps"], meta["classes"],
                   {int(k): v for k, v in meta["class_names"].items()},
                   {int(k): tuple(v) for k, v in meta["class_colors"].items()},
                   Standardiser.from_dict(meta["standardisation"]), meta.get("time_steps"))
