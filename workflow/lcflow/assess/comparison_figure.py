"""The models' comparison on one page (``lcflow compare-models --figure``): each map's accuracy with its
interval, training time and mapping speed, and the F1 of every class (:mod:`lcflow.assess.comparison`)."""

import math
from pathlib import Path

import numpy as np

from lcflow.assess.comparison import Choice, ModelRow, choose, class_names, mean_f1, recommendation
from lcflow.common.atomic import atomic_path
from lcflow.common.figure_text import wrapped


def tile_year(name: str) -> str:
    """A map's tile and year from its name (``31UFT_2018_lstm`` -> ``31UFT 2018``), for a dot's label."""
    parts = name.split("_")
    return " ".join(parts[:2]) if len(parts) >= 3 else name


def color_range(values: np.ndarray) -> tuple[float, float]:
    """A colour scale over the values' own range (0.95-0.99 F1s apart, not lost in 0-1), widened a little."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return 0.0, 1.0
    low, high = float(finite.min()), float(finite.max())
    pad = max(0.005, 0.05 * (high - low))
    return max(0.0, low - pad), min(1.0, high + pad)


def figure(rows: dict[str, ModelRow], out: str | Path) -> None:
    """One page: each map's accuracy with its interval per model; the per-class F1 of every model; training
    time and mapping speed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(rows)
    fig = plt.figure(figsize=(13, 3.2 + 0.45 * len(models) + 0.12 * max(len(models), 1) * 2))
    grid = fig.add_gridspec(2, 3, height_ratios=[1, 1.1], hspace=0.55, wspace=0.35)
    choices = choose(rows)
    _accuracy_panel(fig.add_subplot(grid[0, 0]), rows, choices)
    _cost_panels(fig, grid, rows)
    _f1_panel(fig, fig.add_subplot(grid[1, :]), rows)
    fig.suptitle(
        f"{len(models)} models, {sum(len(r.maps) for r in rows.values())} maps\n"
        + wrapped(recommendation(rows, choices), 150),
        fontsize=10,
    )
    with atomic_path(out, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _accuracy_panel(ax, rows: dict[str, ModelRow], choices: list[Choice]) -> None:
    """Each map's overall accuracy with its interval, a row a model, the mean of its maps in red; the
    chosen model's interval shaded."""
    models = list(rows)
    for y, model in enumerate(models):
        maps = rows[model].maps
        if not maps:
            ax.annotate(
                "not enough evidence",
                (0.5, y),
                ha="center",
                va="center",
                fontsize=7,
                color="0.35",
                xycoords=("axes fraction", "data"),
            )
            continue
        offsets = np.linspace(-0.25, 0.25, len(maps)) if len(maps) > 1 else [0.0]
        for dy, m in zip(offsets, maps):
            ax.errorbar(
                m.accuracy,
                y + dy,
                xerr=[[m.accuracy - m.low], [m.high - m.accuracy]],
                fmt="o",
                color="#08519c" if m.source == "reference sample" else "#969696",
                markersize=3,
                capsize=2,
            )
            ax.annotate(
                tile_year(m.name),
                (m.high, y + dy),
                xytext=(3, 0),
                textcoords="offset points",
                va="center",
                fontsize=5,
                color="0.35",
            )
        ax.plot(np.mean([m.accuracy for m in maps]), y, "|", color="#cb181d", markersize=14, mew=2)
    sources = sorted({m.source for r in rows.values() for m in r.maps})
    best = next((c for c in choices if c.figure == "overall accuracy"), None)
    shaded = ""
    if (
        best is not None
        and best.estimate.low is not None
        and best.estimate.high is not None
        and best.estimate.maps > 1
    ):
        ax.axvspan(best.estimate.low, best.estimate.high, color="#fdae6b", alpha=0.25, zorder=0)
        shaded = f"; shaded: {best.model}'s mean, 95 % interval"
    ax.set_yticks(range(len(models)), models)
    ax.invert_yaxis()
    ax.set_xlabel(
        "overall accuracy, 95 % interval\n("
        + ", ".join(sources)
        + f"; red: mean of the maps{shaded})"
    )
    ax.grid(axis="x", alpha=0.3)


def _cost_panels(fig, grid, rows: dict[str, ModelRow]) -> None:
    """Each model's training time and mapping speed, as bars."""
    models = list(rows)
    for col, (values, label) in enumerate(
        (
            ([rows[m].train_s or 0.0 for m in models], "training time (s)"),
            (
                [float(np.mean(rows[m].px_per_s)) if rows[m].px_per_s else 0.0 for m in models],
                "mapping speed (px/s, mean of the maps)",
            ),
        ),
        start=1,
    ):
        ax = fig.add_subplot(grid[0, col])
        ax.barh(range(len(models)), values, color="#9ecae1")
        for y, v in enumerate(values):
            ranks = rows[models[y]].ranks
            note = f"{v:,.0f}" + (f" ({ranks} ranks)" if col == 1 and ranks and ranks > 1 else "")
            if col == 2 and not rows[models[y]].px_per_s:
                note = "no timing file"
            ax.annotate(
                note, (v, y), xytext=(3, 0), textcoords="offset points", va="center", fontsize=8
            )
        ax.set_yticks(range(len(models)), models if col == 1 else [""] * len(models))
        ax.invert_yaxis()
        ax.set_xlabel(label)
        ax.grid(axis="x", alpha=0.3)
        ax.set_xlim(0, max(values + [1.0]) * 1.35)


def _f1_panel(fig, ax, rows: dict[str, ModelRow]) -> None:
    """The F1 of every class (mean of the maps), a row a model, on a colour scale of their own range."""
    models, classes = list(rows), class_names(rows)
    f1 = np.array([[mean_f1(rows[m], c) for c in classes] for m in models]).reshape(
        len(models), len(classes)
    )
    low, high = color_range(f1)
    image = ax.imshow(np.ma.masked_invalid(f1), vmin=low, vmax=high, cmap="viridis", aspect="auto")
    for (y, x), v in np.ndenumerate(f1):
        if not math.isnan(v):
            ax.text(
                x,
                y,
                f"{v:.3f}",
                ha="center",
                va="center",
                fontsize=8,
                color="white" if v < (low + high) / 2 else "black",
            )
    ax.set_yticks(range(len(models)), models)
    ax.set_xticks(
        range(len(classes)),
        [wrapped(f"{c} {n}") for c, n in classes.items()],
        rotation=30,
        ha="right",
        fontsize=7,
    )
    ax.set_title("F1 per class (mean of the maps)", fontsize=10)
    fig.colorbar(image, ax=ax, fraction=0.02)
