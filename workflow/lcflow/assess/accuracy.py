"""Accuracy of a map: against an independently labelled reference sample (accuracy and class areas with
confidence intervals, Olofsson et al. 2014), agreement with the training reference on the held-out test
samples, and, for the demo, against truth."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rasterio

from lcflow.assess.design import LAYER as design_layer
from lcflow.assess.design import class_pixels
from lcflow.common import evidence
from lcflow.common.atomic import write_text
from lcflow.common.metrics import scores, stratified_estimates
from lcflow.common.raster import Grid, read_tag
from lcflow.errors import LcflowError
from lcflow.labels import samples_table
from lcflow.labels.nomenclature import Nomenclature
from lcflow.train.model_dirs import saved_models
from lcflow.train.model_dirs.evaluation import evaluate_table

log = logging.getLogger("lcflow")


def against_truth(map_path: str | Path, truth_path: str | Path, nomenclature: Nomenclature) -> dict:
    """Every pixel of the map against a truth raster of CLC level-3 codes, mapped to the nomenclature."""
    if Grid.of(map_path) != Grid.of(truth_path):
        raise LcflowError(f"truth raster {truth_path} is not on the grid of map {map_path}")
    with rasterio.open(map_path) as m, rasterio.open(truth_path) as t:
        predicted, map_nodata = m.read(1), m.nodata
        truth = nomenclature.apply(t.read(1))
    ok = (truth != nomenclature.nodata) & (predicted != map_nodata)
    result = scores(truth[ok], predicted[ok], nomenclature.names)
    result["unmapped_fraction"] = float(
        ((truth != nomenclature.nodata) & (predicted == map_nodata)).mean()
    )
    return result


def against_reference(
    map_path: str | Path,
    reference: str | Path,
    column: str = "reference",
    nomenclature: Nomenclature | None = None,
) -> dict:
    """Accuracy and class areas of the map from labelled reference points (any CRS; GeoPackage, shapefile,
    GeoJSON, or CSV with lon/lat).

    Points drawn by ``lcflow design-sample`` carry their stratum and its pixel count; points without them
    are taken as a simple random sample of the mapped pixels (one stratum). Points without a reference
    label are left out and counted; reference codes must be classes of the map's nomenclature: the
    classes the map holds, and every class of ``nomenclature`` where given (a class the model never
    learnt, rare in its samples, is one the map omits wherever the reference finds it).
    """
    points = reference_points(reference, column)
    labelled = points[points[column].notna()]
    names = {int(k): v for k, v in (read_tag(map_path, "class_names") or {}).items()}
    mapped, on_map, pixel_area = _mapped_at(map_path, labelled)
    used = labelled[on_map]
    ref = used[column].astype(int).to_numpy()
    names = (
        {**(nomenclature.names if nomenclature is not None else {}), **names} if names else names
    )
    known = set(names)
    unknown = sorted(set(ref.tolist()) - known) if names else []
    if unknown:
        raise LcflowError(
            f"reference file {reference}: reference code(s) {', '.join(map(str, unknown))} are not classes "
            f"of the map's nomenclature ({', '.join(map(str, sorted(known)))}; give the map's own "
            "nomenclature with --level or --mapping)"
        )
    counts_of = {
        "points": int(len(points)),
        "points_unlabelled": int(len(points) - len(labelled)),
        "points_off_map": int((~on_map).sum()),
        "points_used": int(len(used)),
    }
    if counts_of["points_off_map"]:
        log.warning(
            "reference file %s: %d of %d labelled points lie outside map %s or on its nodata, and are left out "
            "(the estimate stands for the mapped area only)",
            reference,
            counts_of["points_off_map"],
            len(labelled),
            map_path,
        )
    short = evidence.shortfall(ref, "labelled points on the map")
    if short:
        if not len(labelled):
            short = (
                f"none of its {len(points)} points has a label in column {column!r} (label the design, "
                f"docs/own-data.md); an accuracy needs {evidence.RULE}"
            )
        return {
            **evidence.withheld(short, f"reference file {reference}"),
            "reference": str(reference),
            **counts_of,
        }
    counts = class_pixels(map_path)
    stratum, stratum_pixels, design = _design(used, counts)
    classes = sorted(set(counts) | set(ref.tolist()))
    try:
        est = stratified_estimates(
            stratum, stratum_pixels, mapped[on_map].astype(int), ref, classes, pixel_area
        )
    except ValueError as exc:
        raise LcflowError(f"reference file {reference}: {exc}") from exc
    est.update(
        reference=str(reference),
        design=design,
        **counts_of,
        class_names=[names.get(c, str(c)) for c in classes],
        mapped_area_ha=[counts.get(c, 0) * pixel_area / 10_000 for c in classes],
    )
    return est


def _mapped_at(map_path: str | Path, points) -> tuple[np.ndarray, np.ndarray, float]:
    """The map's class at each point (in the map's CRS), whether the point lies on the map and off its nodata,
    and the area of a pixel (m²)."""
    with rasterio.open(map_path) as ds:
        at = points.to_crs(ds.crs.to_wkt())
        xy = list(zip(at.geometry.x, at.geometry.y))
        mapped = (
            np.array([v[0] for v in ds.sample(xy, indexes=1)]) if xy else np.array([], dtype=int)
        )
        pixel_area = abs(ds.transform.a * ds.transform.e)
        inside = np.array(
            [
                ds.bounds.left <= x < ds.bounds.right and ds.bounds.bottom < y <= ds.bounds.top
                for x, y in xy
            ],
            dtype=bool,
        )
        on_map = inside & (mapped != ds.nodata) if xy else np.array([], dtype=bool)
    return mapped, on_map, pixel_area


def _design(used, counts: dict[int, int]) -> tuple[np.ndarray, dict[int, float], str]:
    """Each point's stratum, each stratum's pixels, and the design's name: the strata the file records
    (``lcflow design-sample``'s), else one stratum of every mapped pixel (a simple random sample)."""
    if {"stratum", "stratum_pixels"} <= set(used.columns):
        stratum = used["stratum"].astype(int).to_numpy()
        stratum_pixels = {
            int(h): float(n) for h, n in used.groupby("stratum")["stratum_pixels"].first().items()
        }
        return stratum, stratum_pixels, "stratified random (strata from the file)"
    return (
        np.zeros(len(used), dtype=int),
        {0: float(sum(counts.values()))},
        "simple random (no stratum columns)",
    )


def reference_points(path: str | Path, column: str):
    """The reference points as a GeoDataFrame; their reference column as nullable integers."""
    import geopandas as gpd
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise LcflowError(f"reference file {path} does not exist")
    try:
        if path.suffix.lower() == ".csv":
            frame = pd.read_csv(path)
            if not {"lon", "lat"} <= set(frame.columns):
                raise LcflowError(
                    f"reference file {path}: a CSV needs lon and lat columns (WGS84); it has "
                    f"{', '.join(frame.columns)}"
                )
            frame = gpd.GeoDataFrame(
                frame, geometry=gpd.points_from_xy(frame["lon"], frame["lat"]), crs=4326
            )
        else:
            frame = gpd.read_file(path, layer=_points_layer(path))
    except LcflowError:
        raise
    except Exception as exc:  # unreadable files: one line naming the file
        raise LcflowError(f"reference file {path} cannot be read ({exc})") from exc
    if column not in frame.columns:
        raise LcflowError(
            f"reference file {path} has no column {column!r} (columns: "
            f"{', '.join(c for c in frame.columns if c != 'geometry')})"
        )
    if frame.crs is None:
        raise LcflowError(f"reference file {path} has no CRS")
    if not set(frame.geometry.geom_type) <= {"Point"}:
        raise LcflowError(
            f"reference file {path}: reference data are points; found {sorted(set(frame.geometry.geom_type))}"
        )
    values = pd.to_numeric(frame[column], errors="coerce")
    bad = frame[column][
        values.isna() & frame[column].notna() & (frame[column].astype(str).str.strip() != "")
    ]
    if len(bad) or (values.dropna() % 1 != 0).any():
        shown = sorted(
            {str(v) for v in bad} | {str(v) for v in values.dropna()[values.dropna() % 1 != 0]}
        )
        raise LcflowError(
            f"reference file {path}: column {column!r} holds value(s) that are not class codes: "
            f"{', '.join(shown[:10])}"
        )
    return frame.assign(**{column: values.astype("Int64")})


def _points_layer(path: Path) -> str | None:
    """The layer of reference points: design-sample's where the file has it, else the file's only layer; a
    file of several other layers is refused naming them (reading the first would be a guess)."""
    import pyogrio

    layers = [str(name) for name, _ in pyogrio.list_layers(path)]
    if design_layer in layers or len(layers) <= 1:
        return design_layer if design_layer in layers else None
    raise LcflowError(
        f"reference file {path} has {len(layers)} layers ({', '.join(layers)}) and none named "
        f"{design_layer!r}: keep the labelled points in one layer, or name it {design_layer!r}"
    )


@dataclass(frozen=True)
class AssessmentOutputs:
    """The files an assessment writes: its JSON and, where asked, the confusion matrix's PNG (or why there
    is none) and the class areas' PNG (mapped and area-adjusted)."""

    assessment: Path
    figure: Path | None = None
    areas: Path | None = None

    @classmethod
    def of(
        cls,
        assessment: str | Path,
        figure: str | Path | None = None,
        areas: str | Path | None = None,
    ) -> AssessmentOutputs:
        return cls(
            Path(assessment),
            None if figure is None else Path(figure),
            None if areas is None else Path(areas),
        )


def run(
    model_dir: str | Path,
    samples: str | Path,
    map_path: str | Path,
    out: AssessmentOutputs | str | Path,
    *,
    truth: str | Path | None = None,
    nomenclature: Nomenclature | None = None,
    reference: str | Path | None = None,
    reference_column: str = "reference",
) -> dict:
    """Assess a map: against a labelled reference sample, the truth, and the model's held-out test rows;
    write the assessment (JSON) and, where asked, its figures; return it.

    Args:
        model_dir: the model that made the map (its classes, and the test rows' scores).
        samples: the samples table whose test rows are scored (agreement, not map accuracy).
        map_path: the class map.
        out: the files to write (a path alone: the JSON, no figures).
        truth: a raster of true classes (the demo's); None: none.
        nomenclature: the map's classes (needed with ``truth`` and to count reference classes it lacks).
        reference: labelled reference points (``lcflow design-sample``'s, or one's own); None: none.
        reference_column: the column of the points' labels.
    """
    out = out if isinstance(out, AssessmentOutputs) else AssessmentOutputs.of(out)
    trained = saved_models.load(model_dir)
    table = samples_table.read(samples, min_classes=1)
    test = table.split("test")
    result: dict = {"map": str(map_path), "model": trained.model.name}
    if reference is not None:
        result["reference"] = against_reference(map_path, reference, reference_column, nomenclature)
    if len(test.frame):
        result["test_samples"] = {
            **evaluate_table(trained, test, f"the test rows of {samples}"),
            "what": "agreement with the training labels on held-out samples, not map accuracy",
        }
    if truth is not None:
        if nomenclature is None:
            raise LcflowError("assessing against truth needs the nomenclature of the labels")
        result["truth"] = against_truth(map_path, truth, nomenclature)
    write_text(out.assessment, json.dumps(result, indent=1))
    from lcflow.assess.accuracy_figures import areas_figure, confusion_figure  # matplotlib's

    if out.figure is not None:
        key = "truth" if "truth" in result else "test_samples"
        if key in result:
            confusion_figure(
                result[key], out.figure, f"{Path(map_path).stem}: {key.replace('_', ' ')}"
            )
    if out.areas is not None:
        areas_figure(result, map_path, out.areas, Path(map_path).stem)
    return result


def quote(assessment: dict) -> str:
    """The accuracy of a map to quote: the reference sample's (an independent, area-weighted estimate), with
    its 95 % interval; the agreement with the training labels and the demo's truth are not map accuracy."""
    ref = assessment.get("reference") or {}
    if evidence.lacking(ref):
        return f"none: not enough evidence in reference {ref.get('reference', '')}: {evidence.lacking(ref)}"
    if ref.get("overall_accuracy") is None:
        test = evidence.lacking(assessment.get("test_samples"))
        return "none: no reference sample" + (
            f"; test agreement: not enough evidence ({test})"
            if test
            else " (test_agreement_OA is agreement with the training labels, not accuracy)"
        )
    return (
        f"OA {ref['overall_accuracy']:.3f} ± {ref['overall_accuracy_ci95']:.3f} (reference sample of "
        f"{ref.get('points_used', '?')} points, 95 % CI)"
    )


def summarize(paths: list[str | Path], out: str | Path) -> str:
    """One line per assessment as TSV: overall accuracy from the reference sample with its 95 % interval,
    agreement with the training labels on test samples (OA, kappa), against truth where there is one, and
    which of them to quote."""
    lines = [
        "map\tmodel\treference_OA\treference_OA_ci95\ttest_agreement_OA\ttest_agreement_kappa\ttruth_OA\ttruth_kappa"
        "\tquote"
    ]
    for p in sorted(map(Path, paths)):
        try:
            r = json.loads(p.read_text())
            model = r["model"]
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise LcflowError(
                f"{p} is not an assessment written by lcflow assess ({type(exc).__name__}: {exc})"
            ) from exc
        t, g, ref = r.get("test_samples", {}), r.get("truth", {}), r.get("reference", {})
        cells = [
            ref.get("overall_accuracy"),
            ref.get("overall_accuracy_ci95"),
            t.get("overall_accuracy"),
            t.get("kappa"),
            g.get("overall_accuracy"),
            g.get("kappa"),
        ]
        lines.append(
            "\t".join(
                [p.stem, model] + ["" if v is None else f"{v:.4f}" for v in cells] + [quote(r)]
            )
        )
    text = "\n".join(lines) + "\n"
    write_text(out, text)
    return text
