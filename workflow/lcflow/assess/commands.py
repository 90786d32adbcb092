"""``lcflow design-sample``, ``lcflow assess`` and ``lcflow summarize``: the accuracy of the maps."""

import logging
import sys

from lcflow.common import cli_args, path_guard
from lcflow.defaults import default
from lcflow.errors import LcflowError
from lcflow.labels.commands import nomenclature_of, nomenclature_options

log = logging.getLogger("lcflow")


def cmd_design_sample(a):
    from lcflow.assess import design as sample_design

    guesses = {}
    for item in a.class_users_accuracy:
        code, _, value = item.partition("=")
        try:
            guesses[int(code)] = float(value)
        except ValueError:
            raise LcflowError(
                f"--class-users-accuracy {item!r}: expected CODE=U, e.g. 512=0.95"
            ) from None
    design = sample_design.Design(a.target_se, a.min_per_class, a.users_accuracy, guesses, a.seed)
    points = sample_design.draw(a.map, design)
    sample_design.write(points, a.map, a.out, a.csv)
    log.info(
        "%d reference points (%s per class) -> %s",
        len(points),
        points["stratum"].value_counts().sort_index().to_dict(),
        a.out,
    )


def cmd_assess(a):
    from lcflow.assess import accuracy as assess

    # the nomenclature maps the truth, and tells a reference class the map never holds (an omission) from a
    # code that is no class at all
    nomen = nomenclature_of(a) if a.truth or a.reference else None
    out = assess.AssessmentOutputs.of(a.out, a.figure, a.areas_figure)
    r = assess.run(
        a.model_dir,
        a.samples,
        a.map,
        out,
        truth=a.truth,
        nomenclature=nomen,
        reference=a.reference,
        reference_column=a.reference_column,
    )
    parts = [
        f"{k}: "
        + (f"OA {v['overall_accuracy']:.4f}" if "overall_accuracy" in v else "not enough evidence")
        for k, v in r.items()
        if isinstance(v, dict)
    ]
    log.info("%s: %s", a.map, ", ".join(parts))


def cmd_summarize(a):
    from lcflow.assess import accuracy as assess

    sys.stdout.write(assess.summarize(a.assessments, a.out))


def cmd_compare_models(a):
    from lcflow.assess import compare_models

    sys.stdout.write(
        compare_models.write(a.assessments, a.models, a.timings or [], a.out, a.figure)
    )


def register(command) -> None:
    """Add this stage's commands; ``command(name, help, **kw)`` makes one sub-parser."""
    _design_sample_command(command)
    _assess_command(command)
    _summarize_command(command)
    _compare_models_command(command)


def _design_sample_command(command) -> None:
    """``lcflow design-sample``."""
    p = command(
        "design-sample",
        "a stratified random sample of reference points from a map, to label independently",
    )
    p.add_argument(
        "--map",
        required=True,
        type=path_guard.input_file,
        help="class map written by lcflow predict: its classes are the strata",
    )
    p.add_argument(
        "--out",
        required=True,
        type=path_guard.output_file,
        help="GeoPackage of points to write (map CRS; an empty 'reference' column)",
    )
    p.add_argument(
        "--csv", type=path_guard.output_file, help="also write the points as CSV (with lon/lat)"
    )
    p.add_argument(
        "--target-se",
        **cli_args.from_config("assess.design.target_se"),
        help="standard error of overall accuracy aimed at (Cochran's sample size)",
    )
    p.add_argument(
        "--min-per-class",
        **cli_args.from_config("assess.design.min_per_class"),
        help="points per map class at least",
    )
    p.add_argument(
        "--users-accuracy",
        **cli_args.from_config("assess.design.users_accuracy"),
        help="guess of every class's user's accuracy",
    )
    p.add_argument(
        "--class-users-accuracy",
        nargs="*",
        default=[],
        metavar="CODE=U",
        help="guesses for single classes, e.g. 512=0.95 133=0.5",
    )
    p.add_argument("--seed", **cli_args.from_config("assess.design.seed"), help="draw seed")
    p.set_defaults(func=cmd_design_sample)


def _assess_command(command) -> None:
    """``lcflow assess``."""
    p = command("assess", "accuracy of a map: reference sample, test samples, truth")
    p.add_argument(
        "--model-dir",
        required=True,
        type=path_guard.input_dir,
        help="directory written by lcflow train or lcflow blend",
    )
    p.add_argument(
        "--samples",
        required=True,
        type=path_guard.input_file,
        help="samples table of the map's tile-year",
    )
    p.add_argument(
        "--map",
        required=True,
        type=path_guard.input_file,
        help="class map written by lcflow predict",
    )
    p.add_argument(
        "--reference",
        type=path_guard.input_file,
        help="labelled reference points (lcflow design-sample, labelled; any CRS): "
        "accuracy and class areas with 95 %% intervals",
    )
    p.add_argument(
        "--reference-column",
        default=default("assess.reference_column"),
        help="column of reference class codes",
    )
    p.add_argument(
        "--truth",
        type=path_guard.input_file,
        help="truth raster of CLC level-3 codes on the map's grid",
    )
    nomenclature_options(p)
    p.add_argument("--figure", type=path_guard.output_file, help="confusion matrix PNG to write")
    p.add_argument(
        "--areas-figure",
        type=path_guard.output_file,
        help="class areas PNG to write (mapped, and estimated from the reference sample)",
    )
    p.add_argument(
        "--out", required=True, type=path_guard.output_file, help="assessment JSON to write"
    )
    p.set_defaults(func=cmd_assess)


def _summarize_command(command) -> None:
    """``lcflow summarize``."""
    p = command("summarize", "table of all assessments")
    p.add_argument(
        "--assessments",
        nargs="+",
        required=True,
        type=path_guard.input_file,
        help="assessment JSON files",
    )
    p.add_argument("--out", required=True, type=path_guard.output_file, help="TSV to write")
    p.set_defaults(func=cmd_summarize)


def _compare_models_command(command) -> None:
    """``lcflow compare-models``."""
    p = command(
        "compare-models",
        "every model side by side: map accuracy with intervals, per-class F1, training "
        "time, mapping speed",
    )
    p.add_argument(
        "--assessments",
        nargs="+",
        required=True,
        type=path_guard.input_file,
        help="assessment JSON files of lcflow assess",
    )
    p.add_argument(
        "--models",
        nargs="+",
        required=True,
        type=path_guard.input_dir,
        help="model directories written by lcflow train",
    )
    p.add_argument(
        "--timings",
        nargs="*",
        type=path_guard.input_file,
        help="timing JSON files of lcflow predict --timing",
    )
    p.add_argument(
        "--out", required=True, type=path_guard.output_file, help="TSV to write, one line per model"
    )
    p.add_argument(
        "--figure", type=path_guard.output_file, help="PNG to write: the comparison on one page"
    )
    p.set_defaults(func=cmd_compare_models)
