"""The learning curve of a deep model for the report: loss and accuracy per round, against optimizer steps.

Read from the model's ``history.csv``; the round whose weights the model kept (``best_round``) is marked,
so a reader sees whether training converged, overfitted or stopped early.
"""

import csv
from pathlib import Path

from lcflow.common.atomic import atomic_path
from lcflow.errors import LcflowError


def write(history: str | Path, out: str | Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        rows = list(csv.DictReader(Path(history).open()))
    except OSError as exc:
        raise LcflowError(f"history {history} cannot be read ({exc})") from exc
    if not rows or "step" not in rows[0]:
        raise LcflowError(f"{history} is not a training history (no rows, or no step column)")

    def column(name: str) -> list[float]:
        return [float(r[name]) if r.get(name) not in (None, "") else float("nan") for r in rows]

    steps = column("step")
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(10, 3.6))
    loss_ax.plot(steps, column("loss"), label="train")
    acc_ax.plot(steps, column("accuracy"), label="train")
    if "val_loss" in rows[0]:
        loss_ax.plot(steps, column("val_loss"), label="val")
        acc_ax.plot(steps, column("val_accuracy"), label="val")
    best = int(float(rows[-1].get("best_round") or 0))
    if best:
        best_step = float(rows[best - 1]["step"])
        for ax in (loss_ax, acc_ax):
            ax.axvline(
                best_step, color="0.5", linestyle="--", linewidth=1, label=f"kept: round {best}"
            )
    loss_ax.set_ylabel("loss")
    acc_ax.set_ylabel("accuracy")
    for ax in (loss_ax, acc_ax):
        ax.set_xlabel("optimizer step")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with atomic_path(out, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=90, format="png")
    plt.close(fig)
