"""What every PyTorch model shares: parameters of data-parallel training, weights file, batched prediction."""

import pickle
from abc import abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
from torch import nn

from lcflow.errors import LcflowError
from lcflow.train.loop import deep, run_checkpoint
from lcflow.train.loop.samples import Samples
from lcflow.train.models import Model
from lcflow.train.models.batch_inference import predict_proba


class TorchModel(Model):
    """A network over (samples, steps, features); trained by :func:`lcflow.train.loop.deep.fit`."""

    weights_file = "model.pt"

    #: set by the caller before fit: the data-parallel group, the checkpoint file, what identifies the run,
    comm = None
    checkpoint: Path | None = None
    fingerprint: str = ""
    #: called after each round on every rank; True stops the run (a pruned trial)
    on_round: Callable[[dict], bool] | None = None
    #: after fit and after refit: where each run started (deep.fit's status: resumed_round, finished_before)
    run_status: Mapping[str, Any] = MappingProxyType({})
    refit_status: Mapping[str, Any] = MappingProxyType({})
    local_rank = 0  # this node's rank whose device the model runs on (place)
    #: set by the caller before fit and refit: the rows' class probabilities to learn instead of their labels
    targets: np.ndarray | None = None

    @abstractmethod
    def network(self) -> nn.Module: ...

    def fit(
        self, x: np.ndarray, y: np.ndarray, x_val: np.ndarray | None, y_val: np.ndarray | None
    ) -> list[dict[str, float]]:
        status: dict[str, Any] = {}
        self.run_status = status
        return self._train(
            x, y, x_val, y_val, self.checkpoint, self.fingerprint, status, on_round=self.on_round
        )

    def refit(self, x, y, steps: int, checkpoint: Path | None, fingerprint: str) -> list[dict]:
        """Train afresh on training and validation rows together, with the same initial weights and
        recipe as :meth:`fit`; the last weights are the model's (nothing is left to select on).

        Args:
            x: the training and validation rows' inputs.
            y: their labels.
            steps: optimiser steps to train for.
            checkpoint: where the run's checkpoint goes (a killed refit resumes from it); None: none.
            fingerprint: what the run is (samples, parameters): a checkpoint of another is not resumed.
        """
        status: dict[str, Any] = {}
        self.refit_status = status
        return self._train(x, y, None, None, checkpoint, fingerprint, status, steps=steps)

    def _train(
        self, x, y, x_val, y_val, checkpoint: Path | None, fingerprint: str, status: dict, **run
    ) -> list[dict]:
        """A fresh network from the seed (the same initial weights on every rank), trained by deep.fit."""
        torch.manual_seed(int(self.params["seed"]))
        self.net = self.network()
        samples = Samples(x, y, self.n_classes, x_val, y_val, self.targets, self.observed_flag)
        kept = None if checkpoint is None else run_checkpoint.Checkpoint(checkpoint, fingerprint)
        history = deep.fit(
            self.net,
            samples,
            deep.TrainConfig.from_params(self.params),
            self.comm,
            checkpoint=kept,
            status=status,
            **run,
        )
        # the weights the loss was given, computed once
        self.loss_weights = np.asarray(status["loss_weights"])
        return history

    @property
    def observed_flag(self) -> int | None:
        """The input feature that flags a step as observed: the last of ``n_features`` (the bands, then the flag;
        a position, where the model uses one, follows them), or None for patches."""
        return self.n_features - 1 if self.input_kind == "series" else None

    #: pixels a forward pass takes when predicting, on a CPU and on a GPU
    predict_batch = {"cpu": 8192, "cuda": 8192}

    def predict_proba(self, x):
        if len(x) == 0:
            return np.zeros((0, self.n_classes), dtype=np.float32)
        device = self.device
        return self.corrected(
            predict_proba(self.net, x, device, self.predict_batch.get(device.type, 8192))
        )

    def corrected(self, proba: np.ndarray, axis: int = 1, tau: float | None = None) -> np.ndarray:
        """The network's class probabilities (classes along ``axis``) divided by the loss's class weights to
        the power ``tau`` (None: ``weight_correction``) and renormalised: a weighted loss trains towards
        probabilities proportional to weight x posterior (Saerens et al. 2002), and the map may decide by
        the posterior instead. As they are where the exponent is 0."""
        tau = float(self.params.get("weight_correction", 0.0) if tau is None else tau)
        if tau == 0:
            return proba
        if self.loss_weights is None:
            raise LcflowError(
                f"{self.name}: weight_correction {tau:g} needs the class weights of the loss the model was "
                "trained with, which this model does not record: retrain it"
            )
        shape = [1] * proba.ndim
        shape[axis] = -1
        out = proba / (np.asarray(self.loss_weights, dtype=np.float64) ** tau).reshape(shape)
        return (out / out.sum(axis=axis, keepdims=True)).astype(proba.dtype)

    @property
    def device(self) -> torch.device:
        return deep.device_for(self.local_rank)

    def place(self, local_rank: int) -> None:
        self.local_rank = local_rank
        if getattr(self, "net", None) is not None:
            self.net.to(self.device)

    def save_weights(self, path: Path) -> None:
        torch.save(self.net.state_dict(), path)

    def architecture(self) -> nn.Module:
        """The network that saved weights are loaded into (its initial weights are overwritten)."""
        return self.network()

    def load_weights(self, path: Path) -> None:
        self.net = self.architecture()
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except (
            pickle.UnpicklingError
        ) as exc:  # torch's own message advises weights_only=False, which runs code
            raise LcflowError(
                f"{path}: not the weights lcflow train writes (a state dict of tensors): it holds "
                "pickled objects, which lcflow does not load (unpickling can run code); retrain the "
                "model"
            ) from exc
        except (
            RuntimeError,
            EOFError,
            OSError,
        ) as exc:  # not a torch file at all, or a truncated one
            raise LcflowError(
                f"{path}: not a readable torch weights file ({type(exc).__name__}: "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else 'empty'}); retrain the "
                "model"
            ) from exc
        try:
            self.net.load_state_dict(state)
        except (
            RuntimeError,
            TypeError,
            AttributeError,
        ) as exc:  # another architecture's weights (an older lcflow's)
            first = str(exc).strip().splitlines()[-1].strip()
            raise LcflowError(
                f"{path}: the weights do not fit a {self.name} network of this model's parameters "
                f"and samples ({first}): retrain the model"
            ) from exc
        self.net.to(self.device)
