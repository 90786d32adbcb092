"""The figures of a map's assessment: its confusion matrix (or, with too few points, why there is none) and
its class areas, mapped and estimated from the reference sample (:mod:`lcflow.assess.accuracy`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import rasterio

from lcflow.assess.design import class_pixels
from lcflow.common import evidence
from lcflow.common.atomic import atomic_path
from lcflow.common.figure_text import wrapped
from lcflow.common.raster import read_tag


def _withheld_figure(score: dict, path: str | Path, title: str) -> None:
    """In place of a confusion matrix, a PNG that says why there is none: not enough evidence."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 2.2))
    ax.axis("off")
    ax.text(
        0.5,
        0.5,
        f"{title}\nnot enough evidence for an accuracy figure:\n{wrapped(score[evidence.KEY], 70)}",
        ha="center",
        va="center",
        fontsize=9,
        wrap=True,
    )
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


def confusion_figure(score: dict, path: str | Path, title: str) -> None:
    """Row-normalised confusion matrix as a PNG, for the report (or the reason there is none)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if evidence.lacking(score):
        _withheld_figure(score, path, title)
        return
    codes = score["confusion_matrix"]["labels"]
    per_class = score.get("per_class") or {}
    names = {c: per_class.get(str(c), {}).get("name", "") for c in codes}
    labels = [
        wrapped(f"{c} {names[c]}".strip() if names[c] != str(c) else str(c), 22) for c in codes
    ]
    m = np.asarray(score["confusion_matrix"]["matrix"], dtype=float)
    norm = m / np.maximum(m.sum(axis=1, keepdims=True), 1)
    fig, ax = plt.subplots(figsize=(2.5 + 0.6 * len(labels), 2.2 + 0.6 * len(labels)))
    ax.imshow(norm, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(labels)), labels, rotation=90)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("truth")
    ax.set_title(
        f"{title}\nOA {score['overall_accuracy']:.3f}, kappa {score['kappa']:.3f}", fontsize=9
    )
    for i in range(len(labels)):
        for j in range(len(labels)):
            if m[i, j]:
                ax.text(
                    j,
                    i,
                    f"{norm[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if norm[i, j] > 0.5 else "black",
                )
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


def areas_figure(result: dict, map_path: str | Path, path: str | Path, title: str) -> None:
    """Mapped class areas beside the area-adjusted estimates and their 95 % intervals, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ref = result.get("reference")
    lacking = evidence.lacking(ref)
    if lacking:
        ref = None
    if ref:  # the assessment counted the map's pixels already
        classes, names, mapped = ref["classes"], ref["class_names"], ref["mapped_area_ha"]
    else:
        with rasterio.open(map_path) as ds:
            pixel_ha = abs(ds.transform.a * ds.transform.e) / 10_000
        counts = class_pixels(map_path)
        tags = read_tag(map_path, "class_names") or {}
        classes = sorted(counts)
        names, mapped = (
            [tags.get(str(c), "") for c in classes],
            [counts[c] * pixel_ha for c in classes],
        )
    labels = [wrapped(f"{c} {name}", 30) for c, name in zip(classes, names)]
    y = np.arange(len(classes))
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.35 * len(classes)))
    ax.barh(y + (0.2 if ref else 0), mapped, height=0.4, color="0.7", label="mapped")
    if ref:
        ax.barh(
            y - 0.2,
            ref["area_ha"],
            xerr=ref["area_ci95_ha"],
            height=0.4,
            color="tab:blue",
            capsize=3,
            label=f"reference sample ({ref['points_used']} points), 95 % CI",
        )
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("area (ha)")
    ax.legend(fontsize=7, loc="lower right")
    oa = (
        f", reference OA {ref['overall_accuracy']:.3f} ± {ref['overall_accuracy_ci95']:.3f}"
        if ref
        else f" (reference sample: not enough evidence; mapped areas only)\n{wrapped(lacking, 110)}"
        if lacking
        else " (no reference sample: mapped areas only)"
    )
    ax.set_title(f"{title}{oa}", fontsize=9)
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
