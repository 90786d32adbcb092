"""Accuracy of a map: on the held-out test samples of its tile-year and, for the demo, against truth."""

import json
from pathlib import Path

import numpy as np
import rasterio

from . import samples as samples_table
from .atomic import atomic_path, write_text
from .errors import LcflowError
from .metrics import scores
from .nomenclature import Nomenclature
from .raster import Grid
from .trained import TrainedModel
from .training import evaluate_table


def against_truth(map_path: str | Path, truth_path: str | Path, nomenclature: Nomenclature) -> dict:
    """Every pixel of the map against a truth raster of CLC level-3 codes, mapped to the nomenclature."""
    if Grid.of(map_path) != Grid.of(truth_path):
        raise LcflowError(f"truth raster {truth_path} is not on the grid of map {map_path}")
    with rasterio.open(map_path) as m, rasterio.open(truth_path) as t:
        predicted, map_nodata = m.read(1), m.nodata
        truth = nomenclature.apply(t.read(1))
    ok = (truth != nomenclature.nodata) & (predicted != map_nodata)
    result = scores(truth[ok], predicted[ok], nomenclature.names)
    result["unmapped_fraction"] = float(((truth != nomenclature.nodata) & (predicted == map_nodata)).mean())
    return result


def run(model_dir: str | Path, samples: str | Path, map_path: str | Path, out: str | Path, *,
        truth: str | Path | None = None, nomenclature: Nomenclature | None = None,
        figure: str | Path | None = None) -> dict:
    trained = TrainedModel.load(model_dir)
    table = samples_table.read(samples, min_classes=1)
    test = table.split("test")
    result: dict = {"map": str(map_path), "model": trained.model.name}
    if len(test.frame):
        result["test_samples"] = evaluate_table(trained, test)
    if truth is not None:
        if nomenclature is None:
            raise LcflowError("assessing against truth needs the nomenclature of the labels")
        result["truth"] = against_truth(map_path, truth, nomenclature)
    write_text(out, json.dumps(result, indent=1))
    if figure is not None:
        key = "truth" if "truth" in result else "test_samples"
        if key in result:
            confusion_figure(result[key], figure, f"{Path(map_path).stem}: {key.replace('_', ' ')}")
    return result


def confusion_figure(score: dict, path: str | Path, title: str) -> None:
    """Row-normalised confusion matrix as a PNG, for the report."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = score["confusion_matrix"]["labels"]
    m = np.asarray(score["confusion_matrix"]["matrix"], dtype=float)
    norm = m / np.maximum(m.sum(axis=1, keepdims=True), 1)
    fig, ax = plt.subplots(figsize=(1.0 + 0.6 * len(labels), 0.8 + 0.6 * len(labels)))
    ax.imshow(norm, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(labels)), labels, rotation=90)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("truth")
    ax.set_title(f"{title}\nOA {score['overall_accuracy']:.3f}, kappa {score['kappa']:.3f}", fontsize=9)
    for i in range(len(labels)):
        for j in range(len(labels)):
            if m[i, j]:
                ax.text(j, i, f"{norm[i, j]:.2f}", ha="center", va="center", fontsize=6,
                        color="white" if norm[i, j] > 0.5 else "black")
    fig.tight_layout()
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)


def summarize(paths: list[str | Path], out: str | Path) -> str:
    """One line per assessment (tile, year, model, OA and kappa on test samples and on truth) as TSV."""
    lines = ["map\tmodel\ttest_OA\ttest_kappa\ttruth_OA\ttruth_kappa"]
    for p in sorted(map(Path, paths)):
        try:
            r = json.loads(p.read_text())
            model = r["model"]
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise LcflowError(f"{p} is not an assessment written by lcflow assess ({type(exc).__name__}: {exc})") from exc
        t, g = r.get("test_samples", {}), r.get("truth", {})
        cells = [t.get("overall_accuracy"), t.get("kappa"), g.get("overall_accuracy"), g.get("kappa")]
        lines.append("\t".join([p.stem, model] + ["" if v is None else f"{v:.4f}" for v in cells]))
    text = "\n".join(lines) + "\n"
    write_text(out, text)
    return text
