"""Accuracy figures of a classification: overall and balanced accuracy, kappa, per-class and macro F1, confusion."""

from typing import Any

import numpy as np
from sklearn.metrics import cohen_kappa_score, confusion_matrix, precision_recall_fscore_support


def scores(truth: np.ndarray, predicted: np.ndarray, names: dict[int, str] | None = None) -> dict[str, Any]:
    """The accuracy report of ``predicted`` against ``truth`` (integer class codes)."""
    truth, predicted = np.asarray(truth).astype(int), np.asarray(predicted).astype(int)
    labels = sorted(set(truth.tolist()) | set(predicted.tolist()))
    names = names or {}
    p, r, f, s = precision_recall_fscore_support(truth, predicted, labels=labels, zero_division=0)
    in_truth = np.isin(labels, np.unique(truth))
    return {
        "n_samples": int(truth.size),
        "overall_accuracy": float((truth == predicted).mean()) if truth.size else float("nan"),
        # the mean recall of the classes present: what always answering the commonest class cannot fake
        "balanced_accuracy": float(np.mean(r[in_truth])) if in_truth.any() else float("nan"),
        "kappa": float(cohen_kappa_score(truth, predicted, labels=labels)) if truth.size else float("nan"),
        "macro_f1": float(np.mean(f[in_truth])) if in_truth.any() else float("nan"),
        "per_class": {
            str(c): {"name": names.get(c, str(c)), "precision": float(p[i]), "recall": float(r[i]),
                     "f1": float(f[i]), "support": int(s[i])}
            for i, c in enumerate(labels)
        },
        "confusion_matrix": {"labels": labels, "rows_are": "truth",
                             "matrix": confusion_matrix(truth, predicted, labels=labels).tolist()},
    }
