"""Classifiers of pixel time series. Each takes (samples, steps, features) arrays and class indices."""

import datetime as dt
import importlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from lcflow.common import time_steps
from lcflow.errors import LcflowError
from lcflow.train.models import hyperparameters

if TYPE_CHECKING:
    import torch

#: model name -> module holding a ``Model`` subclass named ``Model``
REGISTRY = {
    "rf": "lcflow.train.models.rf",
    "lstm": "lcflow.train.models.lstm",
    "tempcnn": "lcflow.train.models.tempcnn",
    "resnet": "lcflow.train.models.resnet",
    "ltae": "lcflow.train.models.ltae",
    "presto": "lcflow.train.models.presto",
}
DEEP = ("lstm", "tempcnn", "resnet", "ltae", "presto")
#: models that train on patches (the samples table's patch variant) instead of pixel series
PATCH = ("resnet",)


class Model(ABC):
    """A classifier over prepared input with classes 0..n-1: pixel series (samples, steps, features), or
    for ``input_kind = "patch"`` patches (samples, steps * features, rows, cols)."""

    input_kind: ClassVar[str] = "series"
    #: True: each sample's latitude and longitude follow its features at every step (the last two)
    uses_position: ClassVar[bool] = False
    weights_file: ClassVar[str]
    #: the loss's weight of each class where the model learns with one (a network's last run, divided out
    #: of its probabilities by ``weight_correction``; recorded in model.json); None: none
    loss_weights: np.ndarray | None = None

    def __init__(
        self,
        params: dict[str, Any],
        n_features: int,
        steps: int,
        n_classes: int,
        bands: list[str] | None = None,
        standardise: Any = None,
        time_steps: list[str] | None = None,
    ):
        self.params: hyperparameters.CheckedParams
        if isinstance(params, hyperparameters.CheckedParams) and params.model == self.name:
            self.params = params  # checked once, where it was given
        else:
            self.params = hyperparameters.check(self.name, params)
        self.n_features, self.steps, self.n_classes = n_features, steps, n_classes
        # what the input's features are, for models that map them onto inputs of their own (presto)
        self.bands, self.standardise = bands, standardise
        # the steps' dates (ISO), for models that encode when a step was observed (ltae, presto)
        self.time_steps = time_steps

    def step_dates(self) -> list[dt.date] | None:
        """The steps' dates, or None where the samples had none (steps are then equal parts of a year)."""
        if self.time_steps is None:
            return None
        return time_steps.parse(self.time_steps, self.steps, f"model {self.name}")

    @property
    def name(self) -> str:
        return type(self).__module__.rsplit(".", 1)[-1]

    @abstractmethod
    def fit(
        self, x: np.ndarray, y: np.ndarray, x_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> list[dict[str, float]]:
        """Train; return one history row per round (or one row)."""

    @abstractmethod
    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities (samples, classes)."""

    @abstractmethod
    def save_weights(self, path: Path) -> None:
        """Write the fitted weights to ``path`` (a temporary name; the caller renames it)."""

    def place(self, local_rank: int) -> None:  # noqa: B027 - a model that computes on the CPU has nothing to place
        """Run on the device of this node's rank ``local_rank`` (a GPU of its own where there are several)."""

    @abstractmethod
    def load_weights(self, path: Path) -> None:
        """Read weights written by :meth:`save_weights`, without running code stored in the file."""

    @property
    def device(self) -> "torch.device | None":
        """The torch device the model computes on; None where it computes by other means (on the CPU)."""
        return None

    def predict_dense(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities (classes, rows, cols) of every pixel of one prepared patch (a patch model)."""
        raise NotImplementedError(f"{self.name} classifies pixel series, not patches")


def model_class(name: str) -> type[Model]:
    if name not in REGISTRY:
        raise LcflowError(f"unknown model {name!r}; known: {', '.join(REGISTRY)}")
    return importlib.import_module(REGISTRY[name]).Model
