"""Pictures of a map for the report: the classes in their colours with a legend, beside the confidence.

A whole tile (10980 x 10980 px) is read at a reduced size (at most ``max_px`` a side, from the COG's
overviews where they exist), nearest for classes, so the picture costs little whatever the tile.
"""

import json
from pathlib import Path

import numpy as np
import rasterio
from rasterio.enums import Resampling

from .atomic import atomic_path


def _reduced(path: str | Path, max_px: int, resampling: Resampling) -> tuple[np.ndarray, float | None, object]:
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


def write(map_path: str | Path, confidence_path: str | Path, out: str | Path, title: str, max_px: int = 1024) -> None:
    """One PNG: the class map with a legend of the classes present, and the confidence (0-100 %)."""
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
    handles = [Patch(color=np.array(colormap.get(c, (128, 128, 128, 255))[:3]) / 255,
                     label=f"{c} {names.get(str(c), '')}"[:44]) for c in present]
    left.legend(handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    conf = np.ma.masked_equal(confidence, conf_nodata) if conf_nodata is not None else confidence
    shown = right.imshow(conf, extent=extent, cmap=ListedColormap(plt.get_cmap("magma")(np.linspace(0, 1, 20))),
                         vmin=0, vmax=100, interpolation="nearest")
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
