"""Every model of a run side by side, so that a user can pick one: map accuracy with its 95 % interval,
per-class F1, training time and mapping speed, as a table and one figure for the report.

Accuracy comes from the reference sample where a map has one (Olofsson et al. 2014 estimators, written by
``lcflow assess``); without one, from the agreement with the held-out test samples, with a Wilson interval
(binomial, the samples taken as independent), and the table says which. Per-class F1 is the harmonic mean
of the user's and producer's accuracies of the reference estimate (else the test samples' F1), averaged
over the maps. Speed is the map's pixels over the wall time of ``lcflow predict``'s mapping (windows read,
classified and written), from the timing file predict writes beside the map.

It names the model to take for overall accuracy and the one to take for the rare classes (macro F1, which
counts every class alike), each with a 95 % interval over the maps (Student's t on the maps' values; one
map: its own accuracy interval, and none for F1), and the models whose mean lies inside that interval,
which the maps cannot tell apart from it.
"""

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lcflow.common import evidence
from lcflow.errors import LcflowError
from lcflow.train.model_dirs.model_dir import read_metrics

log = logging.getLogger("lcflow")

Z95 = 1.959963984540054


def wilson_interval(correct: float, n: int) -> tuple[float, float]:
    """95 % Wilson score interval of a proportion ``correct`` of ``n`` trials (stays inside 0..1, unlike the
    normal approximation, for accuracies near 1 on a few hundred samples)."""
    if n <= 0:
        raise ValueError("no samples")
    z2 = Z95 * Z95
    centre = (correct + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(correct * (1 - correct) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class MapScore:
    """One map's accuracy: estimate, 95 % interval and where they come from; per-class F1 by class code."""

    name: str
    source: str
    accuracy: float
    low: float
    high: float
    f1: dict[int, float]
    class_names: dict[int, str]


@dataclass
class ModelRow:
    """A model's maps with an accuracy figure (``maps``) and those without (``withheld``: map name -> why)."""

    model: str
    maps: list[MapScore] = field(default_factory=list)
    withheld: dict[str, str] = field(default_factory=dict)
    train_s: float | None = None
    ranks: int | None = None
    px_per_s: list[float] = field(default_factory=list)


def _f1(u: float, p: float) -> float:
    return 0.0 if u + p == 0 else 2 * u * p / (u + p)


def map_score(path: Path) -> tuple[str, MapScore | str]:
    """The model and the accuracy of one assessment JSON: from its reference sample, else its test samples;
    where neither has evidence enough for a figure (:mod:`lcflow.common.evidence`), the reason."""
    try:
        r = json.loads(path.read_text())
        model = r["model"]
        ref, test = r.get("reference") or {}, r.get("test_samples") or {}
        if evidence.lacking(test) and ref.get("overall_accuracy") is None:
            why = [
                f"{part}: {evidence.lacking(r.get(part))}"
                for part in ("reference", "test_samples")
                if evidence.lacking(r.get(part))
            ]
            return model, "; ".join(why)
        if ref.get("overall_accuracy") is not None:
            oa, ci = float(ref["overall_accuracy"]), float(ref["overall_accuracy_ci95"])
            f1 = {
                int(c): _f1(u, p)
                for c, u, p in zip(ref["classes"], ref["users_accuracy"], ref["producers_accuracy"])
            }
            names = {
                int(c): n
                for c, n in zip(
                    ref["classes"], ref.get("class_names") or [str(c) for c in ref["classes"]]
                )
            }
            return model, MapScore(
                path.stem, "reference sample", oa, max(0.0, oa - ci), min(1.0, oa + ci), f1, names
            )
        oa, n = float(test["overall_accuracy"]), int(test["n_samples"])
        low, high = wilson_interval(oa, n)
        per_class = test.get("per_class") or {}
        f1 = {int(c): float(v["f1"]) for c, v in per_class.items()}
        names = {int(c): v.get("name", c) for c, v in per_class.items()}
        return model, MapScore(path.stem, "test samples", oa, low, high, f1, names)
    except (
        OSError,
        UnicodeDecodeError,
        json.JSONDecodeError,
        KeyError,
        TypeError,
        ValueError,
    ) as exc:
        raise LcflowError(
            f"{path} is not an assessment written by lcflow assess with a reference sample or "
            f"test samples ({type(exc).__name__}: {exc})"
        ) from None


def _read_json(path: Path, what: str) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LcflowError(f"{path} is not {what} ({type(exc).__name__}: {exc})") from None


def collect(
    assessments: list[str | Path], model_dirs: list[str | Path], timings: list[str | Path]
) -> dict[str, ModelRow]:
    """Per model, in the order the model directories are given: its maps' scores, training time and ranks
    (``metrics.json`` of its directory) and the mapping speed of each of its maps."""
    rows: dict[str, ModelRow] = {}
    for d in map(Path, model_dirs):
        metrics = read_metrics(d)
        rows[metrics["model"]] = ModelRow(
            metrics["model"], train_s=metrics["train_seconds"], ranks=metrics["world_size"]
        )
    for p in sorted(map(Path, assessments)):
        model, score = map_score(p)
        if model not in rows:
            raise LcflowError(
                f"assessment {p} is of model {model!r}, which no --models directory holds "
                f"({', '.join(rows) or 'none given'})"
            )
        if isinstance(score, str):
            rows[model].withheld[p.stem] = score
            log.warning("%s: no accuracy figure to compare, not enough evidence (%s)", p, score)
        else:
            rows[model].maps.append(score)
    for p in map(Path, timings):
        t = _read_json(p, "a timing file written by lcflow predict")
        try:
            model, px_per_s = t["model"], float(t["px_per_s"])
        except (KeyError, TypeError, ValueError) as exc:
            raise LcflowError(
                f"{p}: no {exc} (not a timing file written by lcflow predict)"
            ) from None
        if model not in rows:
            raise LcflowError(
                f"timing file {p} is of model {model!r}, which no --models directory holds"
            )
        rows[model].px_per_s.append(px_per_s)
    for row in rows.values():
        if not row.maps and not row.withheld:
            raise LcflowError(f"model {row.model}: no assessment among --assessments")
    return rows


def class_names(rows: dict[str, ModelRow]) -> dict[int, str]:
    names: dict[int, str] = {}
    for row in rows.values():
        for m in row.maps:
            names.update(m.class_names)
    return dict(sorted(names.items()))


def mean_f1(row: ModelRow, code: int) -> float:
    """The class's F1 averaged over the maps that have the class (NaN where none has it)."""
    values = [m.f1[code] for m in row.maps if code in m.f1]
    return float(np.mean(values)) if values else float("nan")


def map_macro_f1(m: MapScore) -> float:
    """One map's macro F1: the mean F1 of the classes it has (NaN where it has none)."""
    return float(np.mean(list(m.f1.values()))) if m.f1 else float("nan")


@dataclass(frozen=True)
class Estimate:
    """A model's mean over its maps with its 95 % interval (None where one map leaves none)."""

    mean: float
    low: float | None
    high: float | None
    maps: int


def over_maps(values: list[float], one_map: tuple[float, float] | None = None) -> Estimate:
    """The mean of the maps' ``values`` and its 95 % interval (Student's t over the maps, clipped to 0..1);
    with one map, ``one_map`` (the map's own interval) or none."""
    from scipy import stats

    x = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if not x.size:
        return Estimate(float("nan"), None, None, 0)
    mean = float(x.mean())
    if x.size == 1:
        low, high = one_map if one_map else (None, None)
        return Estimate(mean, low, high, 1)
    half = float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return Estimate(mean, max(0.0, mean - half), min(1.0, mean + half), int(x.size))


def accuracy_estimate(row: ModelRow) -> Estimate:
    one = (row.maps[0].low, row.maps[0].high) if len(row.maps) == 1 else None
    return over_maps([m.accuracy for m in row.maps], one)


def macro_f1_estimate(row: ModelRow) -> Estimate:
    return over_maps([map_macro_f1(m) for m in row.maps])


@dataclass(frozen=True)
class Choice:
    """The model to take for one figure, its estimate, and the models the maps cannot tell from it."""

    figure: str
    model: str
    estimate: Estimate
    level: list[str]

    def sentence(self) -> str:
        e = self.estimate
        interval = (
            f"95 % interval {e.low:.3f}-{e.high:.3f} over {e.maps} map{'s' if e.maps > 1 else ''}"
            if e.low is not None
            else f"{e.maps} map, no interval"
        )
        level = f"; {', '.join(self.level)} within that interval" if self.level else ""
        return f"for {self.figure} take {self.model} ({e.mean:.3f}, {interval}{level})"


def choose(rows: dict[str, ModelRow]) -> list[Choice]:
    """The model of the highest mean overall accuracy and that of the highest mean macro F1, each with the
    models whose mean lies inside its interval."""
    out = []
    for figure, estimate in (
        ("overall accuracy", accuracy_estimate),
        ("the rare classes (macro F1)", macro_f1_estimate),
    ):
        estimates = {name: estimate(row) for name, row in rows.items() if row.maps}
        usable = {name: e for name, e in estimates.items() if not math.isnan(e.mean)}
        if not usable:
            continue
        best = max(usable, key=lambda name: usable[name].mean)  # the first given wins a tie
        e = usable[best]
        level = [
            name
            for name, other in usable.items()
            if name != best and e.low is not None and other.mean >= e.low
        ]
        out.append(Choice(figure, best, e, level))
    return out


def recommendation(rows: dict[str, ModelRow], choices: list[Choice] | None = None) -> str:
    """One line: which model to take for overall accuracy and which for the rare classes (``choices``:
    :func:`choose`'s, where already made)."""
    text = "; ".join(c.sentence() for c in (choose(rows) if choices is None else choices))
    if not text:
        return "No model to recommend: no map has evidence enough for an accuracy figure"
    lacking = [name for name, row in rows.items() if not row.maps]
    if lacking:
        text += f"; {', '.join(lacking)}: not enough evidence"
    if not any(m.source == "reference sample" for row in rows.values() for m in row.maps):
        text += (
            "; no map has a reference sample: the choice rests on agreement with the training labels' "
            "test samples (CORINE's where they are the labels), not on the maps' accuracy"
        )
    return text[:1].upper() + text[1:]


def table(rows: dict[str, ModelRow]) -> str:
    """TSV: one line per model."""
    classes = class_names(rows)
    head = [
        "model",
        "take_for",
        "maps",
        "accuracy_from",
        "accuracy_mean",
        "accuracy_low",
        "accuracy_high",
        "accuracy_low_min",
        "accuracy_high_max",
        "macro_f1",
        "macro_f1_mean",
        "macro_f1_low",
        "macro_f1_high",
        "train_s",
        "train_ranks",
        "predict_px_s",
    ] + [f"f1_{c}" for c in classes]
    taken: dict[str, list[str]] = {}
    for c in choose(rows):
        figure = "overall_accuracy" if c.figure == "overall accuracy" else "macro_f1"
        taken.setdefault(c.model, []).append(figure)
        for level in c.level:  # the maps cannot tell it from the model taken
            taken.setdefault(level, []).append(f"{figure}: level with {c.model}")
    bound = lambda v: "" if v is None else f"{v:.4f}"  # noqa: E731 - an interval's end, empty where none
    lines = ["\t".join(head)]
    for row in rows.values():
        run = [
            "" if row.train_s is None else f"{row.train_s:.1f}",
            "" if row.ranks is None else str(row.ranks),
            f"{np.mean(row.px_per_s):.0f}" if row.px_per_s else "",
        ]
        withheld = f"{len(row.withheld)} maps not enough evidence" if row.withheld else ""
        if not row.maps:  # no figure to give: the reason stands in the accuracy_from column
            lines.append(
                "\t".join(
                    [row.model, "", "0", f"not enough evidence ({len(row.withheld)} maps)"]
                    + [""] * 9
                    + run
                    + [""] * len(classes)
                )
            )
            continue
        f1 = [mean_f1(row, c) for c in classes]
        oa, macro = accuracy_estimate(row), macro_f1_estimate(row)
        source = "; ".join(
            filter(None, [" + ".join(sorted({m.source for m in row.maps})), withheld])
        )
        cells = [
            row.model,
            ",".join(taken.get(row.model, [])),
            str(len(row.maps)),
            source,
            f"{oa.mean:.4f}",
            bound(oa.low),
            bound(oa.high),
            f"{min(m.low for m in row.maps):.4f}",
            f"{max(m.high for m in row.maps):.4f}",
            f"{np.nanmean(f1):.4f}" if f1 else "",
            "" if math.isnan(macro.mean) else f"{macro.mean:.4f}",
            bound(macro.low),
            bound(macro.high),
            *run,
        ]
        lines.append("\t".join(cells + ["" if math.isnan(v) else f"{v:.4f}" for v in f1]))
    return "\n".join(lines) + "\n"
