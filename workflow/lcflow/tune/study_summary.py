"""``lcflow tune-summary``: what a study found, for the final training and for a reader: the best trial's
parameters as YAML, every trial as CSV beside it, and Optuna's figures of the search."""

import csv
import io
import logging
import os
from pathlib import Path
from typing import Any

import yaml

from lcflow.common.atomic import atomic_path, write_text
from lcflow.errors import LcflowError
from lcflow.tune import study as studies
from lcflow.tune import study_files

log = logging.getLogger("lcflow.tune")

BEST_FILE, TRIALS_FILE = "best_params.yaml", "trials.csv"
FIGURES = {
    "history": "optimisation_history.png",
    "importances": "param_importances.png",
    "intermediate": "intermediate_values.png",
}


def summarize(
    study_dir: str | Path,
    out: str | Path,
    storage_url: str | None = None,
    figures: bool = True,
    model: str | None = None,
) -> dict[str, Any]:
    """``lcflow tune-summary``: the best trial's parameters as YAML, every trial as CSV beside it, and
    Optuna's figures of the search (history, importances, intermediate values).

    Args:
        study_dir: the study's folder.
        out: the best parameters' YAML to write.
        storage_url: an RDB storage URL; None: the study's journal.
        figures: draw the figures.
        model: the model whose study to read, where the storage holds several (its name's prefix); None:
            the only one.
    """
    study_dir, out = Path(study_dir), Path(out)
    study = studies.load_study(study_dir, storage_url, prefix=f"{model}-" if model else None)
    complete = study.get_trials(deepcopy=False, states=(studies.TrialState.COMPLETE,))
    if not complete:
        raise LcflowError(
            f"study {study.study_name} in {study_dir}: no trial has finished yet "
            f"({studies.counts(study)})"
        )
    best = study.best_trial
    model = study.study_name.split("-", 1)[0]
    c = studies.counts(study)
    best_doc = {
        "model": model,
        "study": study.study_name,
        "trial": best.number,
        "value": float(best.value),
        "metric": best.user_attrs.get("metric", "val overall accuracy"),
        "trials": {"complete": c["complete"], "pruned": c["pruned"], "failed": c["fail"]},
        "worker": best.user_attrs.get("worker"),
        "world_size": best.user_attrs.get("world_size"),
        "params": {k: studies.plain_value(v) for k, v in best.params.items()},
    }
    checkpoint = study_files.trial_checkpoint(study_dir, study.study_name, studies.trained_by(best))
    # a deep model's: its final training starts from it (read_best resolves it)
    if checkpoint.exists():
        best_doc["checkpoint"] = os.path.relpath(checkpoint, out.parent)
    write_text(out.parent / TRIALS_FILE, _trials_csv(study))
    if figures:
        _figures(study, out.parent)
    write_text(out, yaml.safe_dump(best_doc, sort_keys=False))
    log.info(
        "study %s: best trial %d, %.4f, of %d complete and %d pruned -> %s",
        study.study_name,
        best.number,
        best.value,
        c["complete"],
        c["pruned"],
        out,
    )
    return best_doc


def _trials_csv(study) -> str:
    frame = study.trials_dataframe(
        attrs=(
            "number",
            "state",
            "value",
            "datetime_start",
            "datetime_complete",
            "duration",
            "params",
            "user_attrs",
        )
    )
    frame["rounds"] = [len(t.intermediate_values) for t in study.get_trials(deepcopy=False)]
    buf = io.StringIO()
    frame.to_csv(buf, index=False, quoting=csv.QUOTE_MINIMAL)
    return buf.getvalue()


def _best_title(study) -> str:
    """What the final training takes from the study: the best trial and its parameters."""
    best = study.best_trial
    params = ", ".join(
        f"{k}={studies.plain_value(v):.3g}"
        if isinstance(studies.plain_value(v), float)
        else f"{k}={studies.plain_value(v)}"
        for k, v in best.params.items()
    )
    return f"best: trial {best.number} ({best.value:.4f}); the final training takes\n{params}"


def _figures(study, directory: Path) -> None:
    """Optuna's matplotlib figures of the study; one that cannot be drawn (importances need two
    complete trials with varying parameters) is a placeholder saying why."""
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    from optuna.visualization import matplotlib as ovm

    metric = next(
        (t.user_attrs["metric"] for t in study.trials if "metric" in t.user_attrs),
        "overall_accuracy",
    )
    draw = {
        "history": ovm.plot_optimization_history,
        "importances": ovm.plot_param_importances,
        "intermediate": ovm.plot_intermediate_values,
    }
    for key, plot in draw.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Optuna's matplotlib plots are marked experimental
            try:
                ax = plot(study)
                ax = ax.flat[0] if hasattr(ax, "flat") else ax
                fig = ax.figure
                fig.set_size_inches(7, 4.5)
                if key != "importances":  # trials and rounds are counted in whole numbers
                    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
                if key == "intermediate":
                    ax.set_xlabel("validation round")
                    ax.set_ylabel(f"val {metric.replace('_', ' ')}")
                elif key == "history":
                    ax.set_ylabel(f"val {metric.replace('_', ' ')}")
                    ax.set_title(_best_title(study), fontsize=9)
            except Exception as exc:  # noqa: BLE001 - a figure that cannot be drawn says why instead
                fig, axis = plt.subplots(figsize=(7, 4.5))
                axis.axis("off")
                axis.text(
                    0.5, 0.5, f"{key}: not available\n({exc})", ha="center", va="center", wrap=True
                )
        fig.tight_layout()
        with atomic_path(directory / FIGURES[key], suffix=".png") as tmp:
            fig.savefig(tmp, format="png", dpi=100)
        plt.close(fig)
