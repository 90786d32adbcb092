"""``lcflow compare-models``: every model side by side, as a table (:mod:`lcflow.assess.comparison`) and a
figure (:mod:`lcflow.assess.comparison_figure`)."""

import logging
from pathlib import Path

from lcflow.assess import comparison
from lcflow.assess.comparison_figure import figure
from lcflow.common.atomic import write_text

log = logging.getLogger("lcflow")


def write(
    assessments: list[str | Path],
    model_dirs: list[str | Path],
    timings: list[str | Path],
    out: str | Path,
    figure_out: str | Path | None = None,
) -> str:
    """The table (TSV) and, given ``figure_out``, the figure; returns the table.

    Args:
        assessments: every map's assessment (``lcflow assess``'s JSON).
        model_dirs: every model's directory (training time, parameters).
        timings: every map's prediction timing (JSON).
        out: the table to write.
        figure_out: the figure to write; None: none.
    """
    rows = comparison.collect(assessments, model_dirs, timings)
    text = comparison.table(rows)
    if figure_out:
        figure(rows, figure_out)
    write_text(out, text)
    log.info("%d models compared -> %s", len(rows), out)
    log.info("%s", comparison.recommendation(rows))
    return text
