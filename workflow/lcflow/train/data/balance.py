"""How much each class weighs in training: a choice, recorded with the model, never a hidden default."""

import numpy as np

from lcflow.errors import LcflowError


def class_weights(y: np.ndarray, n_classes: int, how: str) -> np.ndarray:
    """Loss weight per class: ``none`` (all 1), ``balanced`` (inverse frequency, as scikit-learn), or
    ``sqrt`` (its square root: rare classes count more without giving up overall accuracy)."""
    counts = np.bincount(y, minlength=n_classes).astype(float)
    balanced = counts.sum() / (n_classes * np.maximum(counts, 1))
    if how == "none":
        return np.ones(n_classes)
    if how == "balanced":
        return balanced
    if how == "sqrt":
        return np.sqrt(balanced)
    raise LcflowError(f"class_weight {how!r}: use none, sqrt or balanced")
