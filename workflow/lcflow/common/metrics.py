"""Accuracy figures of a classification: overall and balanced accuracy, kappa, per-class and macro F1, confusion."""

from typing import Any

import numpy as np


def scores(
    truth: np.ndarray, predicted: np.ndarray, names: dict[int, str] | None = None
) -> dict[str, Any]:
    """The accuracy report of ``predicted`` against ``truth`` (integer class codes)."""
    # imported here: scikit-learn's import takes about 2 CPU-s (SciPy's statistics), which every process
    # importing this module paid, the maps' too (they score nothing)
    from sklearn.metrics import cohen_kappa_score, confusion_matrix, precision_recall_fscore_support

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
        "kappa": float(cohen_kappa_score(truth, predicted, labels=labels))
        if truth.size
        else float("nan"),
        "macro_f1": float(np.mean(f[in_truth])) if in_truth.any() else float("nan"),
        "per_class": {
            str(c): {
                "name": names.get(c, str(c)),
                "precision": float(p[i]),
                "recall": float(r[i]),
                "f1": float(f[i]),
                "support": int(s[i]),
            }
            for i, c in enumerate(labels)
        },
        "confusion_matrix": {
            "labels": labels,
            "rows_are": "truth",
            "matrix": confusion_matrix(truth, predicted, labels=labels).tolist(),
        },
    }


def stratified_estimates(
    stratum,
    stratum_pixels: dict[int, float],
    map_class,
    reference,
    classes: list[int],
    pixel_area_m2: float,
    z: float = 1.96,
) -> dict[str, Any]:
    """Accuracy and class areas of a map from a stratified random sample of reference points (Stehman 2014,
    Int. J. Remote Sensing 35(13), eq. 2-3 and 25-27: strata need not be the map's classes).

    Each figure is a ratio of stratum-weighted means, its variance the linearised one of the ratio
    estimator without finite-population correction (strata hold millions of pixels). With the map's
    classes as strata these are the estimators of Olofsson et al. 2014 (:func:`area_adjusted`). Lists
    follow ``classes``; a stratum needs at least 2 points.

    Args:
        stratum: each point's stratum.
        stratum_pixels: the pixels of each stratum.
        map_class: the map's class at each point.
        reference: the reference class at each point.
        classes: the classes, in the order of the lists returned.
        pixel_area_m2: a pixel's area, for the class areas.
        z: the normal quantile of the confidence intervals (1.96: 95 %).
    """
    stratum, map_class, reference = (np.asarray(a) for a in (stratum, map_class, reference))
    strata = sorted(stratum_pixels)
    members = {h: stratum == h for h in strata}
    small = {h: int(m.sum()) for h, m in members.items() if m.sum() < 2}
    if small:
        raise ValueError(
            f"every stratum needs at least 2 sample points; strata with fewer: {small}"
        )
    total = float(sum(stratum_pixels.values()))

    def ratio(y: np.ndarray, x: np.ndarray) -> tuple[float, float]:
        """(estimate, standard error) of sum(y) / sum(x) over the population."""
        y_hat = sum(stratum_pixels[h] * y[m].mean() for h, m in members.items())
        x_hat = sum(stratum_pixels[h] * x[m].mean() for h, m in members.items())
        if x_hat == 0:
            return float("nan"), float("nan")
        r = y_hat / x_hat
        var = 0.0
        for h, m in members.items():
            yh, xh = y[m].astype(float), x[m].astype(float)
            cov = np.cov(yh, xh, ddof=1)
            var += (
                stratum_pixels[h] ** 2
                * (cov[0, 0] + r**2 * cov[1, 1] - 2 * r * cov[0, 1])
                / m.sum()
            )
        return float(r), float(np.sqrt(max(var, 0.0)) / x_hat)

    one = np.ones(stratum.shape)
    oa, oa_se = ratio(map_class == reference, one)
    users, producers, areas = [], [], []
    for k in classes:
        hit = (map_class == k) & (reference == k)
        users.append(ratio(hit, map_class == k))
        producers.append(ratio(hit, reference == k))
        areas.append(ratio(reference == k, one))
    hectares = total * pixel_area_m2 / 10_000
    return {
        "classes": list(classes),
        "n_points": int(stratum.size),
        "overall_accuracy": oa,
        "overall_accuracy_ci95": z * oa_se,
        "users_accuracy": [u for u, _ in users],
        "users_accuracy_ci95": [z * e for _, e in users],
        "producers_accuracy": [p for p, _ in producers],
        "producers_accuracy_ci95": [z * e for _, e in producers],
        "area_ha": [a * hectares for a, _ in areas],
        "area_ci95_ha": [z * e * hectares for _, e in areas],
    }


def area_adjusted(counts, mapped_pixels, pixel_area_m2: float, z: float = 1.96) -> dict[str, Any]:
    """Olofsson et al. 2014 (Remote Sensing of Environment 148): accuracy and class areas from a stratified
    random sample whose strata are the map's classes, given as an error matrix of sample counts.

    ``counts[i][j]``: points mapped as class i whose reference class is j; ``mapped_pixels[i]``: pixels of
    the map in class i. The map's own pixel counts are biased by its errors; these weight each stratum's
    points by its mapped share, so the areas and accuracies hold for the whole map, with 95 % intervals.
    """
    n = np.asarray(counts, dtype=int)
    mapped = np.asarray(mapped_pixels, dtype=float)
    k = n.shape[0]
    if n.shape != (k, k) or mapped.shape != (k,):
        raise ValueError(
            f"counts must be square (classes x classes) and mapped_pixels one per class; got "
            f"{n.shape} and {mapped.shape}"
        )
    i, j = np.nonzero(n)
    reps = n[i, j]
    stratum, reference = np.repeat(i, reps), np.repeat(j, reps)
    result = stratified_estimates(
        stratum, dict(enumerate(mapped)), stratum, reference, list(range(k)), pixel_area_m2, z
    )
    result.pop("classes")
    result["mapped_area_ha"] = (mapped * pixel_area_m2 / 10_000).tolist()
    result["sample_counts"] = n.tolist()
    return result
