"""``lcflow labels`` and ``lcflow sample``: labels on the tile grid, and the samples table; the nomenclature
options the later stages share."""

import argparse
import logging
from pathlib import Path

from lcflow.common import cli_args, path_guard
from lcflow.defaults import default
from lcflow.errors import LcflowError

log = logging.getLogger("lcflow")


def nomenclature_of(args: argparse.Namespace, own_codes: bool = False):
    """The nomenclature of --level / --mapping; ``own_codes``: the mapping maps the codes of the user's
    reference data, not CLC codes."""
    from lcflow.labels import nomenclature

    if own_codes and not args.mapping:
        raise LcflowError("--reference needs --mapping: the nomenclature file that maps its codes to classes")
    return nomenclature.load(args.level, args.mapping, clc_codes=not own_codes)


def nomenclature_options(p: argparse.ArgumentParser) -> None:
    """--level and --mapping: the nomenclature of labels, consistent maps, assessment and reference labels."""
    p.add_argument("--level", type=int, choices=(1, 2, 3), default=default("labels.level"), help="CORINE level of the classes")
    p.add_argument("--mapping", type=path_guard.input_file,
                   help="custom nomenclature, CSV (clc_code or code, class_code or 'ignore', class_name"
                                     "[, red, green, blue]) or YAML (classes, ignore), instead of a level")


def cmd_labels(a):
    from lcflow.labels import alignment as labels

    source = labels.LabelSource(Path(a.reference or a.corine), corine=a.reference is None, code_column=a.code_column,
                                layer=a.layer, resampling=a.resampling)
    labels.run(source, a.grid, a.out, nomenclature_of(a, own_codes=a.reference is not None), change=a.change,
               change_layer=a.change_layer, unlabelled=labels.Unlabelled(a.unlabelled_warn, a.unlabelled_max))
    log.info("labels -> %s", a.out)


def cmd_sample(a):
    from lcflow.labels import sampling
    from lcflow.labels.cleaning import Cleaning
    from lcflow.labels.transfer import ChangeTest

    frame = sampling.run(a.cube, a.valid, a.labels, a.out, tile=a.tile, year=a.year, per_class=a.per_class,
                         min_valid_fraction=a.min_valid_fraction, boundary_px=a.boundary_px, block_px=a.block_px,
                         fractions=a.fractions, seed=a.seed, patch_px=a.patch_px,
                         cleaning=Cleaning(a.min_label_probability, a.clean_folds, a.max_drop_fraction, seed=a.seed,
                                           reference_data=a.clean_reference_data,
                                           tree_rows=a.clean_tree_rows or None),
                         reference_cube=a.reference_cube, change_test=ChangeTest(a.change_mad_k),
                         min_per_class=a.min_per_class)
    log.info("%d samples (%s) -> %s", len(frame), frame["split"].value_counts().to_dict(), a.out)


def register(command) -> None:
    """Add this stage's commands; ``command(name, help, **kw)`` makes one sub-parser."""
    p = command("labels", "CORINE or reference data on the tile grid, in the configured nomenclature")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--corine", type=path_guard.input_file,
                        help="CORINE raster (grid codes 1..44 or CLC codes) or vector layer (a Code_NN "
                                         "column), any CRS")
    source.add_argument("--reference", type=path_guard.input_file,
                        help="your own labelled polygons or points (vector layer, any CRS); needs "
                                            "--code-column and --mapping")
    p.add_argument("--code-column", help="column of codes of a vector layer (CORINE: the single Code_NN column)")
    p.add_argument("--layer", help="layer of a vector file that holds several")
    p.add_argument("--change", type=path_guard.input_file,
                   help="CLC change layer (raster or vector): the pixels it marks are left unlabelled")
    p.add_argument("--change-layer", help="layer of the change file, when it holds several")
    p.add_argument("--grid", required=True, type=path_guard.input_file, help="a raster on the tile grid (the cube)")
    p.add_argument("--resampling", choices=("auto", "nearest", "mode"), default=default("labels.resampling"),
                   help="raster cells onto the grid: auto takes nearest onto a finer grid, mode onto a coarser one "
                        "(polygons are burnt by pixel centre)")
    nomenclature_options(p)
    p.add_argument("--unlabelled-warn", **cli_args.from_config("labels.unlabelled_warn"),
                   help="warn when CORINE gives no class to more than this share of the tile")
    p.add_argument("--unlabelled-max", **cli_args.from_config("labels.unlabelled_max"),
                   help="refuse a tile CORINE leaves without a class above this share")
    p.add_argument("--out", required=True, type=path_guard.output_file, help="class raster (COG) to write")
    p.set_defaults(func=cmd_labels)

    p = command("sample", "samples table of one tile-year")
    p.add_argument("--cube", required=True, type=path_guard.input_file, help="cube written by lcflow cube")
    p.add_argument("--valid", required=True, type=path_guard.input_file, help="its valid-observation counts")
    p.add_argument("--labels", required=True, type=path_guard.input_file, help="class raster written by lcflow labels")
    p.add_argument("--tile", required=True, help="MGRS tile id")
    p.add_argument("--year", type=int, required=True, help="year of the cube")
    p.add_argument("--per-class", **cli_args.from_config("sample.per_class"), help="samples per class at most")
    p.add_argument("--min-valid-fraction", **cli_args.from_config("sample.min_valid_fraction"),
                   help="share of time steps with a clear composite a pixel needs")
    p.add_argument("--boundary-px", **cli_args.from_config("sample.boundary_px"), help="skip pixels this close to another label")
    p.add_argument("--block-px", **cli_args.from_config("sample.block_px"), help="side of the blocks splits are drawn by")
    p.add_argument("--fractions", type=cli_args.json_object, help='JSON {"train": 0.6, "val": 0.2, "test": 0.2}, summing to 1')
    p.add_argument("--seed", **cli_args.from_config("sample.seed"), help="sampling and split seed")
    p.add_argument("--patch-px", **cli_args.from_config("sample.patch_px"), help="also store a patch of this (odd) size around each sample")
    p.add_argument("--min-per-class", **cli_args.from_config("sample.min_per_class"),
                   help="warn about a class with fewer samples (it is kept)")
    p.add_argument("--min-label-probability", **cli_args.from_config("sample.clean.min_label_probability"),
                   help="drop train/val samples whose label gets a lower out-of-fold probability while another class "
                        "is likelier (0: no cleaning)")
    p.add_argument("--clean-folds", **cli_args.from_config("sample.clean.folds"), help="folds (by spatial block) of the cleaning")
    p.add_argument("--max-drop-fraction", **cli_args.from_config("sample.clean.max_drop_fraction"),
                   help="cleaning drops at most this share of a class")
    p.add_argument("--clean-tree-rows", **cli_args.from_config("sample.clean.tree_rows", null_as="0"),
                   help="each judging tree grows on at most this many of its fold's rows (0: a bootstrap of them all)")
    p.add_argument("--clean-reference-data", action="store_true",
                   help="clean labels from your own reference data too (by default only CORINE labels are cleaned)")
    p.add_argument("--reference-cube", type=path_guard.input_file, help="cube of the year the labels show, when --year is another: samples "
                                            "whose series changed since then are dropped from train/val")
    p.add_argument("--change-mad-k", **cli_args.from_config("sample.transfer.mad_k"),
                   help="changed: distance between years above the class median + K robust standard deviations")
    p.add_argument("--out", required=True, type=path_guard.output_file, help="samples table (parquet) to write")
    p.set_defaults(func=cmd_sample)

