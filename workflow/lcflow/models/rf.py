"""Random Forest baseline (scikit-learn) on the flattened, gap-filled time series."""

from pathlib import Path

import joblib
import numpy as np
from sklearn.ensemble import RandomForestClassifier

from . import Model as Base


class Model(Base):
    defaults = {"n_estimators": 300, "max_depth": None, "min_samples_leaf": 1, "max_features": "sqrt",
                "n_jobs": -1, "seed": 42}
    weights_file = "model.joblib"

    def _forest(self) -> RandomForestClassifier:
        p = self.params
        return RandomForestClassifier(
            n_estimators=int(p["n_estimators"]), max_depth=p["max_depth"], min_samples_leaf=int(p["min_samples_leaf"]),
            max_features=p["max_features"], n_jobs=int(p["n_jobs"]), random_state=int(p["seed"]),
            class_weight="balanced", oob_score=True,
        )

    def fit(self, x, y, x_val, y_val, class_weight):
        self.forest = self._forest().fit(x.reshape(len(x), -1), y)
        row = {"epoch": 1, "oob_accuracy": float(self.forest.oob_score_)}
        if x_val is not None and len(x_val):
            row["val_accuracy"] = float((self.predict_proba(x_val).argmax(1) == y_val).mean())
        return [row]

    def predict_proba(self, x):
        proba = np.zeros((len(x), self.n_classes), dtype=np.float32)
        if len(x):
            proba[:, self.forest.classes_] = self.forest.predict_proba(x.reshape(len(x), -1))
        return proba

    def save(self, directory: Path) -> None:
        joblib.dump(self.forest, directory / self.weights_file, compress=3)

    def load_weights(self, directory: Path) -> None:
        self.forest = joblib.load(directory / self.weights_file)
