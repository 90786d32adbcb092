"""A trained model directory: weights plus everything needed to apply them to new data.

``model.json`` records the bands, time steps, classes (codes, names, colours), the standardisation
and the parameters, so predicting on a cube or evaluating on a table needs nothing else.
"""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lcflow.common.atomic import atomic_path, write_text
from lcflow.common.features import Standardiser, prepare, prepare_patches, with_position
from lcflow.errors import LcflowError
from lcflow.train.models import Model, model_class

META_FILE = "model.json"
METRICS_FILE = "metrics.json"
#: parameters that shape a network and came with a default other than what models described before them
#: were built as: such a description is read with the old value (the LSTM pooled mean plus last before
#: ``pooling`` existed)
BUILT_BEFORE_PARAMETER: dict[str, dict[str, Any]] = {"lstm": {"pooling": "mean_last"}}


def legend_to_json(
    class_names: dict[int, str], class_colors: dict[int, tuple[int, int, int]]
) -> dict[str, Any]:
    """The classes' names and colours as ``model.json`` records them (JSON keys are strings)."""
    return {
        "class_names": {str(k): v for k, v in class_names.items()},
        "class_colors": {str(k): list(v) for k, v in class_colors.items()},
    }


def legend_from_json(
    meta: dict[str, Any],
) -> tuple[dict[int, str], dict[int, tuple[int, int, int]]]:
    """The classes' names and colours from a ``model.json``, keyed by class code again."""
    return (
        {int(k): v for k, v in meta["class_names"].items()},
        {int(k): tuple(v) for k, v in meta["class_colors"].items()},
    )


def read_metrics(directory: str | Path) -> dict[str, Any]:
    """A model directory's ``metrics.json`` (a trained model's or a blend's), with the model's name, training
    time and ranks that comparisons and blends read from it checked and typed (``world_size`` 1 where absent)."""
    path = Path(directory) / METRICS_FILE
    try:
        metrics = json.loads(path.read_text())
        return {
            **metrics,
            "model": str(metrics["model"]),
            "train_seconds": float(metrics["train_seconds"]),
            "world_size": int(metrics.get("world_size", 1)),
        }
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LcflowError(
            f"{path} is not the metrics of a model trained by lcflow train ({type(exc).__name__}: "
            f"{exc})"
        ) from None


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def weights_in(directory: Path, name: Any, meta_path: Path) -> Path:
    """The weights file ``model.json`` names: a plain file of the model directory itself. A name with a
    folder or ``..`` would read a file elsewhere, and a device (``/dev/zero``) would never end its read."""
    if not isinstance(name, str) or not name or name in (".", "..") or Path(name).name != name:
        raise LcflowError(
            f"{meta_path}: weights file {name!r} is not the name of a file in the model directory "
            f"{directory} (no folders, no ..)"
        )
    weights = directory / name
    if not weights.exists():
        raise LcflowError(f"model {directory}: weights file {name} is missing")
    if (
        not weights.is_file()
        or weights.is_symlink()
        and directory.resolve() not in weights.resolve().parents
    ):
        raise LcflowError(
            f"model {directory}: weights file {name} is not a regular file of the model directory"
        )
    return weights


@dataclass
class TrainedModel:
    model: Model
    bands: list[str]
    steps: int
    classes: list[int]
    class_names: dict[int, str]
    class_colors: dict[int, tuple[int, int, int]]
    #: the scaling of the model's input; None for a blend, whose members scale their own
    standardise: Standardiser | None
    time_steps: list[str] | None = None

    @property
    def scaling(self) -> Standardiser:
        """The scaling of the model's input (a blend's members each hold their own)."""
        if self.standardise is None:
            raise LcflowError(f"model {self.model.name} scales no input of its own (a blend)")
        return self.standardise

    @property
    def halo(self) -> int:
        """Pixels of context each side that the model needs around a pixel (0 for pixel models)."""
        return int(getattr(self.model, "halo", 0))

    def _check_shape(self, x: np.ndarray) -> None:
        if x.shape[1:3] != (self.steps, len(self.bands)):
            raise LcflowError(
                f"input has {x.shape[1]} steps x {x.shape[2]} bands; the model expects "
                f"{self.steps} x {len(self.bands)} ({', '.join(self.bands)})"
            )

    def predict(
        self, x: np.ndarray, latlon: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Raw values -> class codes, confidence 0..1, and which had no data. ``x`` is (samples, steps,
        bands) for pixel models, (samples, steps, bands, rows, cols) patches for patch models; ``latlon``
        (samples, 2) the samples' positions, for a model that uses them."""
        proba, empty = self.probabilities(x, latlon)
        best = proba.argmax(axis=1)
        return np.asarray(self.classes)[best], proba.max(axis=1), empty

    def probabilities(
        self, x: np.ndarray, latlon: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Raw values as :meth:`predict` takes them -> the probability of every class, (samples, classes) in
        the order of ``classes``, and which samples had no data: what models are averaged or compared by."""
        self._check_shape(x)
        if self.model.input_kind == "patch":
            prepared, empty = prepare_patches(x, self.scaling)
            empty = empty[:, empty.shape[1] // 2, empty.shape[2] // 2]
        else:
            prepared, empty = prepare(x, self.scaling)
            prepared = self._located(prepared, latlon)
        return self.model.predict_proba(prepared), empty

    def _located(self, prepared: np.ndarray, latlon: np.ndarray | None) -> np.ndarray:
        """``prepared`` with the samples' positions appended, for a model that uses them."""
        if not self.model.uses_position:
            return prepared
        if latlon is None or len(latlon) != len(prepared):
            raise LcflowError(
                f"model {self.model.name} needs the position of each of the {len(prepared)} samples"
            )
        return with_position(prepared, latlon)

    def window_probabilities(
        self, x: np.ndarray, latlon: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(steps, bands, rows, cols) raw window with ``halo`` pixels of context each side -> the
        probability of every class, (pixels, classes) in the order of ``classes``, and the no-data mask,
        of the inner (rows - 2 halo, cols - 2 halo) pixels, row-major. ``latlon``: the inner pixels'
        positions (pixels, 2), for a model that uses them."""
        prepared, empty = self.window_inputs(x, latlon)
        return self.input_probabilities(prepared), empty

    def window_inputs(
        self, x: np.ndarray, latlon: np.ndarray | None = None
    ) -> tuple[Any, np.ndarray]:
        """The first half of :meth:`window_probabilities`, CPU work that prediction runs in its reading
        threads: the model's prepared input of a raw window (an array; a blend's: one per member), and the
        no-data mask of its inner pixels."""
        h = self.halo
        if not h:
            t, b, rows, cols = x.shape
            pixels = np.moveaxis(x.reshape(t, b, -1), 2, 0)
            self._check_shape(pixels)
            prepared, empty = prepare(pixels, self.scaling)
            return self._located(prepared, latlon), empty
        self._check_shape(x[None])
        prepared, empty = prepare_patches(x[None], self.scaling)
        return prepared[0], empty[0, h:-h, h:-h].ravel()

    def input_probabilities(self, prepared: Any) -> np.ndarray:
        """The second half: the model on a prepared window, (pixels, classes) of its inner pixels."""
        h = self.halo
        if not h:
            return self.model.predict_proba(prepared)
        proba = self.model.predict_dense(prepared)[:, h:-h, h:-h]
        return proba.reshape(proba.shape[0], -1).T

    def save(self, directory: str | Path) -> None:
        """Weights first (temporary name, then rename), then ``model.json`` with their checksum."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        weights = directory / self.model.weights_file
        with atomic_path(weights) as tmp:
            self.model.save_weights(tmp)
        meta = {
            "model": self.model.name,
            "params": self.model.params,
            "bands": self.bands,
            "steps": self.steps,
            "classes": self.classes,
            **legend_to_json(self.class_names, self.class_colors),
            "standardisation": self.scaling.to_dict(),
            "time_steps": self.time_steps,
            "weights": {"file": weights.name, "sha256": sha256(weights)},
        }
        # a network: its loss's weight of each class
        if self.model.loss_weights is not None:
            meta["loss_class_weights"] = [float(w) for w in self.model.loss_weights]
        write_text(directory / META_FILE, json.dumps(meta, indent=1))

    @classmethod
    def load(cls, directory: str | Path) -> "TrainedModel":
        directory = Path(directory)
        meta_path = directory / META_FILE
        if not meta_path.exists():
            raise LcflowError(f"{directory} is not a trained model directory (no {META_FILE})")
        try:
            meta: dict[str, Any] = json.loads(meta_path.read_text())
            if meta.get("model") == "blend":
                raise LcflowError(
                    f"{directory} is a blend of models: lcflow.train.model_dirs.saved_models.load reads it"
                )
            params = {**BUILT_BEFORE_PARAMETER.get(meta["model"], {}), **meta["params"]}
            model = model_class(meta["model"])(
                params,
                len(meta["bands"]) + 1,
                meta["steps"],
                len(meta["classes"]),
                meta["bands"],
                Standardiser.from_dict(meta["standardisation"]),
                meta.get("time_steps"),
            )
            recorded = meta["weights"]
            if "loss_class_weights" in meta:
                model.loss_weights = np.asarray(
                    meta["loss_class_weights"], dtype=np.float64
                ).reshape(len(meta["classes"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise LcflowError(
                f"{meta_path} is not a model description written by lcflow train ({exc!r})"
            ) from exc
        weights = weights_in(directory, recorded["file"], meta_path)
        if sha256(weights) != recorded["sha256"]:
            raise LcflowError(
                f"model {directory}: {weights.name} is not the weights {META_FILE} was written with "
                "(checksum differs): retrain the model"
            )
        model.load_weights(weights)
        return cls(
            model,
            meta["bands"],
            meta["steps"],
            meta["classes"],
            *legend_from_json(meta),
            Standardiser.from_dict(meta["standardisation"]),
            meta.get("time_steps"),
        )
