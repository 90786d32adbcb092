"""``lcflow labels`` and ``lcflow sample``: labels on the tile grid, and the samples table; the nomenclature
options the later stages share."""

import argparse
import logging
from pathlib import Path

from lcflow.common import cli_args, path_guard
from lcflow.defaults import default
from lcflow.errors import LcflowError
from lcflow.labels.sample_settings import SampleSettings

log = logging.getLogger("lcflow")


def nomenclature_of(args: argparse.Namespace, own_codes: bool = False):
    """The nomenclature of --level / --mapping; ``own_codes`` (or --own-codes): the mapping maps the codes
    of the user's reference data, not CLC codes."""
    from lcflow.labels import nomenclature

    own_codes = own_codes or bool(getattr(args, "own_codes", False))
    if own_codes and not args.mapping:
        raise LcflowError(
            f"{'--reference' if getattr(args, 'reference', None) else '--own-codes'} needs --mapping: "
            "the nomenclature file that maps its codes to classes"
        )
    return nomenclature.load(args.level, args.mapping, clc_codes=not own_codes)


def nomenclature_options(p: argparse.ArgumentParser) -> None:
    """--level and --mapping: the nomenclature of labels, consistent maps, assessment and reference labels."""
    p.add_argument(
        "--level",
        type=int,
        choices=(1, 2, 3),
        default=default("labels.level"),
        help="CORINE level of the classes",
    )
    p.add_argument(
        "--mapping",
        type=path_guard.input_file,
        help="custom nomenclature, CSV (clc_code or code, class_code or 'ignore', class_name"
        "[, red, green, blue]) or YAML (classes, ignore), instead of a level",
    )
    p.add_argument(
        "--own-codes",
        action="store_true",
        help="--mapping maps the codes of your own reference data (labels.reference), not CLC codes",
    )


def cmd_labels(a):
    from lcflow.labels import alignment as labels

    source = labels.LabelSource(
        Path(a.reference or a.corine),
        corine=a.reference is None,
        code_column=a.code_column,
        layer=a.layer,
        resampling=a.resampling,
    )
    labels.run(
        source,
        a.grid,
        a.out,
        nomenclature_of(a, own_codes=a.reference is not None),
        change=a.change,
        change_layer=a.change_layer,
        unlabelled=labels.Unlabelled(a.unlabelled_warn, a.unlabelled_max),
    )
    log.info("labels -> %s", a.out)


def cmd_sample(a):
    from lcflow.labels import sampling

    frame = sampling.run(
        a.cube,
        a.valid,
        a.labels,
        a.out,
        SampleSettings.from_options(a),
        tile=a.tile,
        year=a.year,
        reference_cube=a.reference_cube,
    )
    log.info("%d samples (%s) -> %s", len(frame), frame["split"].value_counts().to_dict(), a.out)


def register(command) -> None:
    """Add this stage's commands; ``command(name, help, **kw)`` makes one sub-parser."""
    _labels_command(command)
    _sample_command(command)


def _labels_command(command) -> None:
    """``lcflow labels``."""
    p = command(
        "labels", "CORINE or reference data on the tile grid, in the configured nomenclature"
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--corine",
        type=path_guard.input_file,
        help="CORINE raster (grid codes 1..44 or CLC codes) or vector layer (a Code_NN "
        "column), any CRS",
    )
    source.add_argument(
        "--reference",
        type=path_guard.input_file,
        help="your own labelled polygons or points (vector layer, any CRS); needs "
        "--code-column and --mapping",
    )
    p.add_argument(
        "--code-column",
        help="column of codes of a vector layer (CORINE: the single Code_NN column)",
    )
    p.add_argument("--layer", help="layer of a vector file that holds several")
    p.add_argument(
        "--change",
        type=path_guard.input_file,
        help="CLC change layer (raster or vector): the pixels it marks are left unlabelled",
    )
    p.add_argument("--change-layer", help="layer of the change file, when it holds several")
    p.add_argument(
        "--grid",
        required=True,
        type=path_guard.input_file,
        help="a raster on the tile grid (the cube)",
    )
    p.add_argument(
        "--resampling",
        choices=("auto", "nearest", "mode"),
        default=default("labels.resampling"),
        help="raster cells onto the grid: auto takes nearest onto a finer grid, mode onto a coarser one "
        "(polygons are burnt by pixel centre)",
    )
    nomenclature_options(p)
    p.add_argument(
        "--unlabelled-warn",
        **cli_args.from_config("labels.unlabelled_warn"),
        help="warn when CORINE gives no class to more than this share of the tile",
    )
    p.add_argument(
        "--unlabelled-max",
        **cli_args.from_config("labels.unlabelled_max"),
        help="refuse a tile CORINE leaves without a class above this share",
    )
    p.add_argument(
        "--out", required=True, type=path_guard.output_file, help="class raster (COG) to write"
    )
    p.set_defaults(func=cmd_labels)


def _sample_command(command) -> None:
    """``lcflow sample``."""
    p = command("sample", "samples table of one tile-year")
    p.add_argument(
        "--cube", required=True, type=path_guard.input_file, help="cube written by lcflow cube"
    )
    p.add_argument(
        "--valid", required=True, type=path_guard.input_file, help="its valid-observation counts"
    )
    p.add_argument(
        "--labels",
        required=True,
        type=path_guard.input_file,
        help="class raster written by lcflow labels",
    )
    p.add_argument("--tile", required=True, help="MGRS tile id")
    p.add_argument("--year", type=int, required=True, help="year of the cube")
    p.add_argument(
        "--reference-cube",
        type=path_guard.input_file,
        help="cube of the year the labels show, when --year is another: samples "
        "whose series changed since then are dropped from train/val",
    )
    SampleSettings.add_options(p)
    p.add_argument(
        "--out", required=True, type=path_guard.output_file, help="samples table (parquet) to write"
    )
    p.set_defaults(func=cmd_sample)
