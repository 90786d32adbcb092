"""Random Forest baseline (scikit-learn) on the flattened, gap-filled time series.

scikit-learn grows the trees; by default lcflow's compiled traversal of them (compiled_forest) computes
the probabilities, the same as scikit-learn's, faster.

Weights are stored with skops, which, unlike pickle or joblib, rebuilds only the types it is told to
trust: a planted weights file cannot run code when a map is predicted.
"""

import logging
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from sklearn.ensemble import RandomForestClassifier

from lcflow.labels.cleaning import forest_bytes
from lcflow.train.data.balance import class_weights
from lcflow.train.models import Model as Base

if TYPE_CHECKING:
    import torch

log = logging.getLogger("lcflow.train")

#: the types a fitted forest holds beyond skops' own (numpy arrays, primitives): the forest, its trees and
#: their node arrays
TRUSTED = [
    "sklearn.ensemble._forest.RandomForestClassifier",
    "sklearn.tree._classes.DecisionTreeClassifier",
    "sklearn.tree._tree.Tree",
]


class Model(Base):
    weights_file = "model.skops"
    local_rank = 0  # this node's rank on whose device the tensors engine walks the trees (place)

    def _forest(self) -> RandomForestClassifier:
        p = self.params
        return RandomForestClassifier(
            n_estimators=int(p["n_estimators"]),
            max_depth=p["max_depth"],
            min_samples_leaf=int(p["min_samples_leaf"]),
            max_features=p["max_features"],
            criterion=p["criterion"],
            n_jobs=int(p["n_jobs"]),
            random_state=int(p["seed"]),
            oob_score=True,
        )

    def fit(self, x, y, x_val, y_val):
        forest = self._forest()
        if self.params["class_weight"] != "none":
            forest.set_params(
                class_weight=dict(
                    enumerate(class_weights(y, self.n_classes, self.params["class_weight"]))
                )
            )
        self.forest = forest.fit(x.reshape(len(x), -1), y)
        size = self.size()
        log.info(
            "forest: %d trees, %d nodes (%.3f a training row a tree), mean depth %.1f, %.0f MB held in memory, "
            "as a map job holds it",
            size["trees"],
            size["nodes"],
            size["nodes"] / size["trees"] / len(x),
            size["mean_depth"],
            size["held_mb"],
        )
        row = {"epoch": 1, "oob_accuracy": float(self.forest.oob_score_)}
        if x_val is not None and len(x_val):
            row["val_accuracy"] = float((self.predict_proba(x_val).argmax(1) == y_val).mean())
        return [row]

    def size(self) -> dict[str, float]:
        """Trees, nodes, mean depth and the megabytes the fitted trees hold (scikit-learn's node records and
        class-count rows): a forest grown until its leaves are pure on many noisily labelled rows grows
        almost as fast as its rows (benchmarks/forest_size.py), and every map job holds it whole."""
        trees = [e.tree_ for e in self.forest.estimators_]
        nodes = sum(t.node_count for t in trees)
        return {
            "trees": len(trees),
            "nodes": int(nodes),
            "mean_depth": float(np.mean([t.max_depth for t in trees])),
            "held_mb": forest_bytes(self.forest) / 1e6,
        }

    def oob_proba(self) -> np.ndarray:
        """Class probabilities of each training sample from the trees that did not see it."""
        proba = np.zeros(
            (len(self.forest.oob_decision_function_), self.n_classes), dtype=np.float32
        )
        proba[:, self.forest.classes_] = np.nan_to_num(self.forest.oob_decision_function_)
        return proba

    def predict_proba(self, x):
        proba = np.zeros((len(x), self.n_classes), dtype=np.float32)
        if len(x):
            rows = x.reshape(len(x), -1)
            engine = self.params["predict_engine"]
            if engine == "compiled":
                proba[:, self.forest.classes_] = self.compiled().predict_proba(rows, self.cores())
            elif engine == "tensors":
                proba[:, self.forest.classes_] = self.tensors().predict_proba(rows)
            else:
                proba[:, self.forest.classes_] = self.forest.predict_proba(rows)
        return proba

    def compiled(self):
        """The fitted forest as compiled_forest's node arrays, built once per forest (fit and
        load_weights set a new one)."""
        from lcflow.train.models.compiled_forest import CompiledForest

        cached = getattr(self, "_compiled", None)
        if cached is None or cached.forest is not self.forest:
            self._compiled = cached = CompiledForest(self.forest)
        return cached

    def place(self, local_rank: int) -> None:
        self.local_rank = local_rank

    @property
    def device(self) -> "torch.device | None":
        """The torch device the tensors engine walks the trees on (this rank's GPU where the job has
        one); None for the CPU engines."""
        if self.params["predict_engine"] != "tensors":
            return None
        from lcflow.train.loop.deep import device_for

        return device_for(self.local_rank)

    def tensors(self):
        """The compiled forest's nodes as torch tensors on ``device``, built once per forest and device."""
        from lcflow.train.models.tensor_forest import TensorForest

        cached, device = getattr(self, "_tensors", None), self.device
        if cached is None or cached.compiled is not self.compiled() or cached.device != device:
            if device.type == "cpu":
                log.warning(
                    "predict_engine tensors on a machine without a GPU: the trees are walked as torch tensors "
                    "on the CPU, many times slower than predict_engine compiled (docs/benchmarks.md)"
                )
            self._tensors = cached = TensorForest(self.compiled(), device)
        return cached

    def cores(self) -> int | None:
        """The cores n_jobs asks for (None: every core this process may run on)."""
        n_jobs = int(self.params["n_jobs"])
        return None if n_jobs < 0 else max(1, n_jobs)

    def save_weights(self, path: Path) -> None:
        _skops_io().dump(self.forest, path, compression=zipfile.ZIP_DEFLATED)

    def load_weights(self, path: Path) -> None:
        self.forest = _skops_io().load(path, trusted=TRUSTED)


def _skops_io():
    """skops.io, imported without its default trust of every scikit-learn estimator: skops lists them with
    ``sklearn.utils.all_estimators``, which imports all of scikit-learn, about 4 CPU s in every process
    that loads a forest (each forest map and assessment; benchmarks/measured/forest_load_import_2core.txt).
    lcflow trusts the types a forest holds alone (TRUSTED), so the list would add nothing to a load."""
    import sys

    if "skops.io" in sys.modules:
        return sys.modules["skops.io"]
    import sklearn.utils

    every = sklearn.utils.all_estimators
    sklearn.utils.all_estimators = lambda *args, **kwargs: []
    try:
        import skops.io
    finally:
        sklearn.utils.all_estimators = every
    return skops.io
