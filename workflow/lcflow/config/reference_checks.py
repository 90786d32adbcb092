"""Checks of ``assess.reference`` before any job: the labelled reference points of each tile-year, read as
``lcflow assess`` reads them, hold classes of the labels' nomenclature."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lcflow.config.bad_value import BadValue
from lcflow.errors import LcflowError

log = logging.getLogger("lcflow")


def check_references(config: dict[str, Any], base: Path, source: str = "corine") -> None:
    """Labelled references come one tile-year at a time, after the design is drawn from that year's map:
    tile-years without one yet are assessed without (a WARNING names them), and assessed again once the
    file is there. None at all is a misspelt pattern. Those there hold class codes of the labels'
    nomenclature (a CORINE level, or ``labels.mapping``'s classes, of the user's own codes with
    ``labels.reference``)."""
    pattern = (config.get("assess") or {}).get("reference")
    if not pattern:
        return
    wanted = {
        (t, y): pattern.format(tile=t, year=y) for t in config["tiles"] for y in config["years"]
    }
    missing = [f"{t} {y}" for (t, y), p in wanted.items() if not (base / p).exists()]
    if len(missing) == len(wanted):
        first = next(iter(wanted.values()))
        raise BadValue(
            ("assess", "reference"),
            f"assess.reference = {pattern!r}: no file for any tile-year (the first "
            f"would be {first!r}): draw the design with the design_sample rule, copy it there, label it, "
            "then set this key (docs/own-data.md)",
        )
    if missing:
        log.warning(
            "config: assess.reference = %r: no labelled file yet for %s; those maps are assessed without a "
            "reference sample until it is there, and again after",
            pattern,
            ", ".join(missing),
        )
    check_reference_codes(config, base, source, [p for p in wanted.values() if (base / p).exists()])


def check_reference_codes(
    config: dict[str, Any], base: Path, source: str, files: list[str]
) -> None:
    """Every labelled reference code of ``files`` is a class of the labels' nomenclature, refused in one
    line naming the file, the codes and the classes."""
    from lcflow.assess.accuracy import reference_points
    from lcflow.labels import nomenclature

    labels_cfg = config["labels"]
    mapping = labels_cfg.get("mapping")
    try:
        classes = nomenclature.load(
            labels_cfg.get("level", 2),
            str(base / mapping) if mapping else None,
            clc_codes=source != "reference",
        ).names
    except LcflowError:
        return  # the mapping's own check says what is wrong with it
    column = (config.get("assess") or {}).get("reference_column", "reference")
    where = (
        f"labels.mapping = {mapping!r}" if mapping else f"CORINE level {labels_cfg.get('level', 2)}"
    )
    for path in files:
        try:
            codes = reference_points(base / path, column)[column].dropna().astype(int)
        except LcflowError as exc:
            raise BadValue(("assess", "reference"), f"assess.reference: {exc}") from None
        unknown = sorted(set(codes.tolist()) - set(classes))
        if unknown:
            raise BadValue(
                ("assess", "reference"),
                f"assess.reference = {path!r}: reference code(s) {', '.join(map(str, unknown[:10]))} "
                f"are not classes of the nomenclature ({where}: "
                f"{', '.join(map(str, sorted(classes)[:20]))})",
            )
