"""Pictures of maps for the report: the classes in their colours with a legend, beside the confidence;
a change map beside its change matrix.

A whole tile (10980 x 10980 px) is read at a reduced size (at most ``max_px`` a side, from the COG's
overviews where they exist), nearest for classes, so the picture costs little whatever the tile.
"""

import json
from pathlib import Path

import numpy as np
import rasterio
from rasterio.coords import BoundingBox
from rasterio.crs import CRS
from rasterio.enums import Resampling

from lcflow.common.atomic import atomic_path
from lcflow.common.figure_text import wrapped
from lcflow.errors import LcflowError


def _reduced(
    path: str | Path, max_px: int, resampling: Resampling
) -> tuple[np.ndarray, float | None, tuple[dict, dict, BoundingBox, CRS | None]]:
    """The band read at most ``max_px`` a side, its nodata, and (colour table, class names, bounds, CRS)."""
    with rasterio.open(path) as ds:
        scale = max(ds.width, ds.height) / max_px
        shape = (max(1, round(ds.height / max(scale, 1))), max(1, round(ds.width / max(scale, 1))))
        data = ds.read(1, out_shape=shape, resampling=resampling)
        try:
            colormap = ds.colormap(1)
        except ValueError:  # a band without a colour table (the confidence map)
            colormap = {}
        names = json.loads(ds.tags().get("class_names", "{}"))
        return data, ds.nodata, (colormap, names, ds.bounds, ds.crs)


def write(
    map_path: str | Path,
    confidence_path: str | Path,
    out: str | Path,
    title: str,
    max_px: int = 1024,
) -> None:
    """One PNG: the class map with a legend of the classes present, and the confidence (0-100 %).

    Args:
        map_path: the class map.
        confidence_path: its confidence map.
        out: the PNG to write.
        title: the figure's title.
        max_px: the longest side drawn, in pixels (a larger map is read at a coarser overview).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    classes, nodata, (colormap, names, bounds, crs) = _reduced(map_path, max_px, Resampling.nearest)
    confidence, conf_nodata, _ = _reduced(confidence_path, max_px, Resampling.average)
    present = [int(c) for c in np.unique(classes) if c != nodata]
    rgb = np.full(classes.shape + (3,), 255, dtype=np.uint8)
    for c in present:
        rgb[classes == c] = colormap.get(c, (128, 128, 128, 255))[:3]
    extent = (bounds.left, bounds.right, bounds.bottom, bounds.top)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13.5, 5.6))
    left.imshow(rgb, extent=extent, interpolation="nearest")
    left.set_title("classes", fontsize=9)
    handles = [
        Patch(
            color=np.array(colormap.get(c, (128, 128, 128, 255))[:3]) / 255,
            label=f"{c} {names.get(str(c), '')}"[:44],
        )
        for c in present
    ]
    left.legend(
        handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False
    )
    conf = np.ma.masked_equal(confidence, conf_nodata) if conf_nodata is not None else confidence
    shown = right.imshow(
        conf,
        extent=extent,
        cmap=ListedColormap(plt.get_cmap("magma")(np.linspace(0, 1, 20))),
        vmin=0,
        vmax=100,
        interpolation="nearest",
    )
    right.set_title("confidence (%)", fontsize=9)
    fig.colorbar(shown, ax=right, shrink=0.8)
    for ax in (left, right):
        ax.tick_params(labelsize=6)
        ax.ticklabel_format(style="plain", useOffset=False)
    fig.suptitle(f"{title} ({crs.to_string() if crs else 'no CRS'}, metres)", fontsize=10)
    fig.tight_layout()
    with atomic_path(out, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=90, format="png")
    plt.close(fig)


def _draw_matrix(fig, ax, matrix: np.ndarray, classes: tuple[list, dict], years: list[int]) -> None:
    """The change matrix (ha) of a pair, on a log scale, each cell with its area; ``classes``: the codes and
    their names."""
    from matplotlib.colors import LogNorm

    codes, names = classes
    k = len(codes)
    shown = ax.imshow(
        np.ma.masked_less_equal(matrix, 0),
        cmap="viridis",
        norm=LogNorm(
            vmin=max(matrix[matrix > 0].min(initial=1.0), 0.01), vmax=max(matrix.max(), 0.02)
        ),
    )
    for i in range(k):
        for j in range(k):
            if matrix[i, j] > 0:
                ax.text(
                    j,
                    i,
                    f"{matrix[i, j]:,.0f}" if matrix[i, j] >= 10 else f"{matrix[i, j]:.1f}",
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="white" if i != j else "black",
                )
    labels = [wrapped(f"{c} {names.get(str(c), '')}", 24) for c in codes]
    ax.set_xticks(range(k), labels, rotation=60, ha="right", fontsize=6)
    ax.set_yticks(range(k), labels, fontsize=6)
    ax.set_xlabel(str(years[1]), fontsize=8)
    ax.set_ylabel(str(years[0]), fontsize=8)
    ax.set_title("change matrix (ha)", fontsize=9)
    fig.colorbar(shown, ax=ax, shrink=0.7)


def _change_line(title: str, pair: dict) -> str:
    """The figure's title line: the share changed, consistent and independent, and against the truth."""
    c, r = pair["consistent"], pair["raw"]
    line = (
        f"{title}: {100 * c['changed_fraction']:.2f} % changed, {100 * r['changed_fraction']:.2f} % between the "
        f"independent annual maps"
        if c["pixels"]
        else f"{title}: no pixel with data in both years"
    )
    if "truth" in c and c["pixels"]:
        line += (
            f"; against truth: stable pixels kept {c['truth']['stable_kept']:.3f} (independent "
            f"{r['truth']['stable_kept']:.3f}), change F1 {c['truth']['change_f1']:.2f} "
            f"({r['truth']['change_f1']:.2f})"
        )
    return line


def change_figure(
    change_path: str | Path,
    summary_path: str | Path,
    out: str | Path,
    title: str,
    max_px: int = 1024,
    legend_rows: int = 12,
) -> None:
    """One PNG of a pair of years: the change map (no change in light grey, changes in the colour of
    the class changed to, the largest from-to classes in the legend) beside the change matrix (ha).

    Args:
        change_path: the change map of the pair.
        summary_path: the consistent maps' summary (JSON), whose change matrix is drawn.
        out: the PNG to write.
        title: the figure's title.
        max_px: the longest side drawn, in pixels.
        legend_rows: the most from-to classes in the legend (the largest).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    with rasterio.open(change_path) as ds:
        years = json.loads(ds.tags().get("years", "[]"))
        table = {r["code"]: r for r in json.loads(ds.tags()["change_classes"])}
    codes, nodata, (_, _, bounds, crs) = _reduced(change_path, max_px, Resampling.nearest)
    summary = json.loads(Path(summary_path).read_text())
    pair = next((p for p in summary["pairs"] if p["years"] == years), None)
    if pair is None:
        raise LcflowError(
            f"{summary_path} has no pair of years {years} (the years of {change_path})"
        )
    rgb = np.full(codes.shape + (3,), 255, dtype=np.uint8)
    for code in np.unique(codes):
        if code != nodata and int(code) in table:
            rgb[codes == code] = table[int(code)]["color"]
    classes = summary["classes"]
    names = summary["class_names"]
    matrix = np.asarray(pair["consistent"]["change_matrix_ha"], dtype=float)
    changed = [
        (matrix[i, j], i, j)
        for i in range(len(classes))
        for j in range(len(classes))
        if i != j and matrix[i, j] > 0
    ]
    changed.sort(reverse=True)
    k = len(classes)
    extent = (bounds.left, bounds.right, bounds.bottom, bounds.top)
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(14, 6), gridspec_kw={"width_ratios": [1.15, 1]}
    )
    left.imshow(rgb, extent=extent, interpolation="nearest")
    left.set_title(f"change {years[0]} -> {years[1]}", fontsize=9)
    handles = [Patch(color=np.array(table[0]["color"]) / 255, label="no change")]
    handles += [
        Patch(
            color=np.array(table[1 + i * k + j]["color"]) / 255,
            label=f"{classes[i]} -> {classes[j]}: {area:,.1f} ha",
        )
        for area, i, j in changed[:legend_rows]
    ]
    if len(changed) > legend_rows:
        handles.append(
            Patch(color="white", label=f"... {len(changed) - legend_rows} more from-to classes")
        )
    left.legend(
        handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False
    )
    left.tick_params(labelsize=6)
    left.ticklabel_format(style="plain", useOffset=False)
    _draw_matrix(fig, right, matrix, (classes, names), years)
    line = _change_line(title, pair)
    fig.suptitle(f"{line}\n({crs.to_string() if crs else 'no CRS'}, metres)", fontsize=9)
    fig.tight_layout()
    with atomic_path(out, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=90, format="png", bbox_inches="tight")
    plt.close(fig)
