"""``lcflow <stage>``: every stage of the workflow as a command, the same on a laptop, in a test, in a Slurm job.

Errors end a command with one line naming what failed (file, item, tile, column, parameter) and a
non-zero exit: 2 for bad input, 1 for anything unexpected. The traceback goes to the log at debug
level (``-v``), which is how the workflow's rules run every command.
"""

import argparse
import json
import logging
import math
import signal
import sys
from pathlib import Path

from .errors import LcflowError
from .remote import SIGNING_CHOICES

log = logging.getLogger("lcflow")

BAD_INPUT, FAILED = 2, 1


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other error of lcflow."""

    def error(self, message: str):
        self.exit(BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Help(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults shown after each option; descriptions and epilogs keep their line breaks."""


def _int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} must be at least {low}")
        return value
    return parse


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _float_above(low: float, inclusive: bool = False):
    def parse(text: str) -> float:
        value = _number(text)
        if not math.isfinite(value) or value < low or (value == low and not inclusive):
            raise argparse.ArgumentTypeError(f"{text} must be a number {'>=' if inclusive else '>'} {low:g}")
        return value
    return parse


_positive_float = _float_above(0)
_non_negative = _float_above(0, inclusive=True)


def _share(text: str) -> float:
    value = _number(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} must be within 0..1")
    return value


def _bounds(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected four numbers xmin,ymin,xmax,ymax") from None
    if len(values) != 4 or not all(map(math.isfinite, values)):
        raise argparse.ArgumentTypeError(f"{text!r}: expected four numbers xmin,ymin,xmax,ymax, got {len(values)}")
    if values[0] >= values[2] or values[1] >= values[3]:
        raise argparse.ArgumentTypeError(f"{text!r}: xmin must be below xmax and ymin below ymax")
    return values


def _scl_classes(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")] if text else []
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected SCL classes 0..11 separated by commas") from None
    bad = [v for v in values if not 0 <= v <= 11]
    if bad:
        raise argparse.ArgumentTypeError(f"SCL class(es) {bad} outside 0..11")
    return values


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not a JSON object")
    return value


def _nomenclature(args, own_codes: bool = False):
    """The nomenclature of --level / --mapping; ``own_codes``: the mapping maps the codes of the user's
    reference data, not CLC codes."""
    from . import nomenclature

    if own_codes and not args.mapping:
        raise LcflowError("--reference needs --mapping: the nomenclature file that maps its codes to classes")
    return nomenclature.load(args.level, args.mapping, clc_codes=not own_codes)


def cmd_synth(a):
    from .synth.demo import make_demo

    make_demo(a.out, a.aoi, a.years, resolution=a.resolution, acquisitions=tuple(a.acquisitions),
              mmu_cells=a.mmu_cells, change_fraction=a.change_fraction)
    log.info("demo data written under %s", a.out)


def cmd_search(a):
    from . import search

    n = search.run(a.tile, a.year, a.out, catalog=a.catalog, api=a.api, collection=a.collection,
                   max_cloud_cover=a.max_cloud_cover)
    log.info("%s %s: %d items -> %s", a.tile, a.year, n, a.out)


def cmd_cube(a):
    from . import cube, remote, sentinel2

    network = remote.Network(timeout_s=a.http_timeout, retries=a.http_retries, retry_delay_s=a.http_retry_delay,
                             threads=a.read_threads, s3_endpoint=a.s3_endpoint)
    grid = cube.run(a.items, a.tile, a.year, a.out, a.valid, bands=sentinel2.check_bands(a.bands.split(",")),
                    resolution=a.resolution, bounds=a.bounds, invalid_scl=a.invalid_scl, dilation_px=a.dilation_px,
                    steps=a.time_steps, block=a.block, min_clear_fraction=a.min_clear_fraction, network=network,
                    signing=a.signing, spectral_indices=[i for i in a.indices.split(",") if i],
                    fill_gaps=a.fill_gaps == "linear", cache_mb=a.cache_mb)
    log.info("%s %s: cube %d x %d px (%s) -> %s", a.tile, a.year, grid.width, grid.height, grid.crs, a.out)


def cmd_labels(a):
    from . import labels

    source = labels.LabelSource(Path(a.reference or a.corine), corine=a.reference is None, code_column=a.code_column,
                                layer=a.layer, resampling=a.resampling)
    labels.run(source, a.grid, a.out, _nomenclature(a, own_codes=a.reference is not None), change=a.change,
               change_layer=a.change_layer)
    log.info("labels -> %s", a.out)


def cmd_sample(a):
    from . import sampling
    from .label_noise import Cleaning
    from .label_transfer import ChangeTest

    frame = sampling.run(a.cube, a.valid, a.labels, a.out, tile=a.tile, year=a.year, per_class=a.per_class,
                         min_valid_fraction=a.min_valid_fraction, boundary_px=a.boundary_px, block_px=a.block_px,
                         fractions=a.fractions, seed=a.seed, patch_px=a.patch_px,
                         cleaning=Cleaning(a.min_label_probability, a.clean_folds, a.max_drop_fraction, seed=a.seed,
                                           reference_data=a.clean_reference_data),
                         reference_cube=a.reference_cube, change_test=ChangeTest(a.change_mad_k),
                         min_per_class=a.min_per_class)
    log.info("%d samples (%s) -> %s", len(frame), frame["split"].value_counts().to_dict(), a.out)


def cmd_train(a):
    from . import training

    params = {**training.parse_params(a.params), **training.parse_overrides(a.set or [])}
    tuned = None
    if a.tuned:  # only then: lcflow.tuning brings Optuna in
        from .tuning import read_best

        tuned = read_best(a.tuned, a.model)
    metrics = training.train(a.model, a.samples, a.out, params, tuned=tuned)
    test = metrics.get("test")
    log.info("%s trained -> %s%s", a.model, a.out,
             f"; test OA {test['overall_accuracy']:.4f}, kappa {test['kappa']:.4f}" if test else "")


def cmd_tune(a):
    import os
    import socket

    from . import training, tuning

    base = {**training.parse_params(a.params), **training.parse_overrides(a.set or [])}
    space = _space_file(a.space, a.model) if a.space else a.space_json
    summary = tuning.tune(a.model, a.samples, a.study, a.trials, space=space, base=base,
                          worker=a.worker or f"{socket.gethostname()}-{os.getpid()}", sampler=a.sampler,
                          pruner=a.pruner, min_rounds=a.min_rounds, reduction_factor=a.reduction_factor, seed=a.seed,
                          metric=a.metric, timeout_minutes=a.timeout_minutes, storage_url=a.storage, out=a.out)
    if summary:
        log.info("worker %s: %d trial(s) run; study %s: %s; best %.4f", summary["worker"], len(summary["trials"]),
                 summary["study"], summary["study_trials"], summary["best_value"])


def _space_file(path: str, model: str) -> dict:
    """A search space file: ``{param: range}`` for the model, or ``{model: {param: range}}``."""
    from . import config

    data = config.load_file(path)
    if model in data and isinstance(data[model], dict):
        return data[model]
    return data


def cmd_tune_summary(a):
    from . import tuning

    best = tuning.summarize(a.study, a.out, storage_url=a.storage, figures=not a.no_figures, model=a.model)
    log.info("best trial %d: %.4f %s -> %s", best["trial"], best["value"], best["params"], a.out)


def cmd_evaluate(a):
    from . import training

    r = training.evaluate(a.model_dir, a.samples, a.out)
    log.info("OA %.4f, kappa %.4f, macro F1 %.4f on %d samples -> %s", r["overall_accuracy"], r["kappa"],
             r["macro_f1"], r["n_samples"], a.out)


def cmd_predict(a):
    from . import predict

    predict.run(a.model_dir, a.cube, a.out, a.confidence, block=a.block, out_probabilities=a.probabilities)
    log.info("map -> %s, confidence -> %s%s", a.out, a.confidence,
             f", probabilities -> {a.probabilities}" if a.probabilities else "")


def cmd_consistent_maps(a):
    from . import consistent_maps

    if len(a.years) != len(a.probabilities):
        raise LcflowError(f"--years names {len(a.years)} years for {len(a.probabilities)} --probabilities")
    nomen = _nomenclature(a) if a.truth else None
    consistent_maps.run(a.probabilities, a.years, a.out, a.confidence, a.changes or [], a.summary,
                        evidence_ratio=a.evidence_ratio, min_change_ha=a.min_change_ha, block=a.block,
                        truths=a.truth, nomenclature=nomen)


def cmd_change_figure(a):
    from . import quicklook

    quicklook.change_figure(a.change, a.summary, a.out, a.title, max_px=a.max_px)


def cmd_summarize_changes(a):
    from . import consistent_maps
    from .atomic import write_text

    write_text(a.out, consistent_maps.summary_table(a.summaries))
    log.info("%d series -> %s", len(a.summaries), a.out)


def cmd_stac_item(a):
    from . import stac_products

    needed = ("summary", "model") if a.change else ("map", "confidence", "year", "model_dir", "manifest")
    missing = [f"--{k.replace('_', '-')}" for k in needed if getattr(a, k) is None]
    if missing:
        raise LcflowError(f"an Item of a {'change' if a.change else 'class'} map needs {' '.join(missing)}")
    if a.change:
        item = stac_products.change_item(Path(a.change), a.tile, a.model, Path(a.summary))
    else:
        item = stac_products.map_item(Path(a.map), Path(a.confidence), a.tile, a.year, Path(a.model_dir),
                                      Path(a.manifest), Path(a.assessment) if a.assessment else None,
                                      Path(a.quicklook) if a.quicklook else None)
    stac_products.write_item(item, a.out, a.catalog)
    log.info("STAC Item %s -> %s", item.id, a.out)


def cmd_stac_catalog(a):
    from . import stac_products

    stac_products.write_catalog(a.items, a.out, a.title)
    log.info("catalog of %d Items -> %s", len(a.items), a.out)


def cmd_assess(a):
    from . import assess

    nomen = _nomenclature(a) if a.truth else None
    r = assess.run(a.model_dir, a.samples, a.map, a.out, truth=a.truth, nomenclature=nomen, figure=a.figure,
                   reference=a.reference, reference_column=a.reference_column, areas=a.areas_figure)
    parts = [f"{k}: OA {v['overall_accuracy']:.4f}" for k, v in r.items() if isinstance(v, dict)]
    log.info("%s: %s", a.map, ", ".join(parts))


def cmd_design_sample(a):
    from . import sample_design

    guesses = {}
    for item in a.class_users_accuracy:
        code, _, value = item.partition("=")
        try:
            guesses[int(code)] = float(value)
        except ValueError:
            raise LcflowError(f"--class-users-accuracy {item!r}: expected CODE=U, e.g. 512=0.95") from None
    design = sample_design.Design(a.target_se, a.min_per_class, a.users_accuracy, guesses, a.seed)
    points = sample_design.draw(a.map, design)
    sample_design.write(points, a.map, a.out, a.csv)
    log.info("%d reference points (%s per class) -> %s", len(points),
             points["stratum"].value_counts().sort_index().to_dict(), a.out)


def cmd_quicklook(a):
    from . import quicklook

    quicklook.write(a.map, a.confidence, a.out, Path(a.map).stem, a.max_px)
    log.info("quicklook -> %s", a.out)


def cmd_learning_curve(a):
    from . import learning_curve

    learning_curve.write(a.history, a.out, a.title or Path(a.history).parent.name)
    log.info("learning curve -> %s", a.out)


def cmd_label_reference(a):
    from .synth.reference import label_from_truth

    n = label_from_truth(a.points, a.truth, a.out, _nomenclature(a))
    log.info("%d reference points labelled from %s -> %s", n, a.truth, a.out)


def cmd_summarize(a):
    from . import assess

    sys.stdout.write(assess.summarize(a.assessments, a.out))


def cmd_check_config(a):
    from . import config

    root = Path(__file__).resolve().parents[2]
    if not (root / "Snakefile").exists():
        raise LcflowError("check-config needs lcflow installed from its repository (pip install -e .)")
    files = a.configfile or [root / config.DEFAULT_CONFIG]
    merged = config.merge(files)
    config.check(merged, root / "workflow" / "schemas" / "config.schema.yaml", base=a.directory,
                 origins=config.Origins(files))
    print(f"config OK: {len(merged['tiles'])} tile(s) x {len(merged['years'])} year(s), models {', '.join(merged['models'])}")


def _nomenclature_args(p):
    p.add_argument("--level", type=int, choices=(1, 2, 3), default=2, help="CORINE level of the classes")
    p.add_argument("--mapping", help="custom nomenclature, CSV (clc_code or code, class_code or 'ignore', class_name"
                                     "[, red, green, blue]) or YAML (classes, ignore), instead of a level")


def _model_epilog() -> str:
    from . import params

    return "model parameters (--set KEY=VALUE):\n" + "\n".join(
        f"{model}:\n{params.describe(model)}" for model in params.MODELS)


def _tune_epilog() -> str:
    from . import search_space

    lines = ["default search spaces (--space replaces the model's):"]
    for model, space in search_space.DEFAULT_SPACES.items():
        lines.append(f"{model}: " + "; ".join(d.describe() for d in search_space.parse(model, space)))
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    from .models import REGISTRY

    ap = _Parser(prog="lcflow", description=__doc__, formatter_class=_Help)
    ap.add_argument("-v", "--verbose", action="store_true", help="debug messages, and the traceback of an error")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")

    def command(name: str, help: str, **kw) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, formatter_class=_Help, **kw)

    p = command("synth", "write the synthetic demo: STAC catalog of scenes, CORINE, truth")
    p.add_argument("--out", required=True, help="directory of the demo data")
    p.add_argument("--aoi", required=True, type=_json_object,
                   help='JSON {"31UFT": [xmin, ymin, xmax, ymax], ...} in each tile\'s UTM CRS')
    p.add_argument("--years", type=int, nargs="+", required=True, help="years of scenes (the first has CORINE)")
    p.add_argument("--resolution", type=_positive_float, default=10.0, help="metres per pixel of the 10 m bands")
    p.add_argument("--acquisitions", type=_int_at_least(1), nargs=2, default=[12, 20], metavar=("MIN", "MAX"),
                   help="fewest and most acquisitions a year")
    p.add_argument("--mmu-cells", type=_int_at_least(1), default=4, help="minimum mapping unit of CORINE, 100 m cells")
    p.add_argument("--change-fraction", type=_share, default=0.03, help="share of the area that changes class")
    p.set_defaults(func=cmd_synth)

    p = command("search", "STAC search of one tile and year -> items.json manifest")
    p.add_argument("--tile", required=True, help="MGRS tile id, e.g. 31UFT")
    p.add_argument("--year", type=int, required=True, help="calendar year")
    p.add_argument("--catalog", help="static STAC catalog.json, a local path or an http(s) URL (or give --api)")
    p.add_argument("--api", help="STAC API root URL (or give --catalog)")
    p.add_argument("--collection", default="sentinel-2-l2a", help="collection to search")
    p.add_argument("--max-cloud-cover", type=float, default=100.0, help="skip scenes with more cloud, percent")
    p.add_argument("--out", required=True, help="manifest to write (a STAC ItemCollection)")
    p.set_defaults(func=cmd_search)

    p = command("cube", "cloud-masked composites on a regular time grid")
    p.add_argument("--items", required=True, help="manifest written by lcflow search")
    p.add_argument("--tile", required=True, help="MGRS tile id")
    p.add_argument("--year", type=int, required=True, help="calendar year of the time grid")
    p.add_argument("--bands", default="B02,B03,B04,B05,B06,B07,B08,B8A,B11,B12", help="Sentinel-2 bands, comma-separated")
    p.add_argument("--resolution", type=_positive_float, default=10.0, help="metres per pixel")
    p.add_argument("--bounds", type=_bounds, help="xmin,ymin,xmax,ymax in the tile's CRS (default: the whole tile)")
    p.add_argument("--invalid-scl", type=_scl_classes, default="0,1,3,8,9,10", help="SCL classes masked out")
    p.add_argument("--dilation-px", type=_int_at_least(0), default=1, help="grow the invalid mask by this many pixels")
    p.add_argument("--time-steps", type=_int_at_least(1), default=12, help="composites per calendar year")
    p.add_argument("--block", type=_int_at_least(16), default=512, help="processing window, pixels a side")
    p.add_argument("--min-clear-fraction", type=_share, default=0.1,
                   help="refuse a cube whose share of composite cells with a clear observation is lower")
    p.add_argument("--indices", default="", help="spectral indices added as bands after the reflectance bands, "
                                                 "comma-separated (NDVI, EVI, SAVI, NDWI, MNDWI, NDMI, NBR, NDBI, NDRE)")
    p.add_argument("--fill-gaps", choices=["none", "linear"], default="none",
                   help="steps without a clear observation: left as nodata, or interpolated linearly in time")
    p.add_argument("--read-threads", type=_int_at_least(1), default=4, help="scene files read at a time")
    p.add_argument("--cache-mb", type=_int_at_least(1), default=2048,
                   help="the most GDAL's block cache may grow to, to hold a decoded block of every scene's assets")
    p.add_argument("--signing", choices=SIGNING_CHOICES, default="auto",
                   help="sign asset URLs before reading (auto: Planetary Computer items are signed)")
    p.add_argument("--http-timeout", type=_positive_float, default=60.0, help="seconds before a request is given up")
    p.add_argument("--http-retries", type=_int_at_least(0), default=6,
                   help="retries of a request answered 429 or 5xx or timed out")
    p.add_argument("--http-retry-delay", type=_positive_float, default=1.0,
                   help="seconds before the first retry; about doubled before each next")
    p.add_argument("--s3-endpoint", help="S3 endpoint of s3:// assets (default: AWS; Copernicus Data Space's is "
                                         "set for its items)")
    p.add_argument("--out", required=True, help="cube to write (tiled GeoTIFF)")
    p.add_argument("--valid", required=True, help="output: valid-observation count per time step")
    p.set_defaults(func=cmd_cube)

    p = command("labels", "CORINE or reference data on the tile grid, in the configured nomenclature")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--corine", help="CORINE raster (grid codes 1..44 or CLC codes) or vector layer (a Code_NN "
                                         "column), any CRS")
    source.add_argument("--reference", help="your own labelled polygons or points (vector layer, any CRS); needs "
                                            "--code-column and --mapping")
    p.add_argument("--code-column", help="column of codes of a vector layer (CORINE: the single Code_NN column)")
    p.add_argument("--layer", help="layer of a vector file that holds several")
    p.add_argument("--change", help="CLC change layer (raster or vector): the pixels it marks are left unlabelled")
    p.add_argument("--change-layer", help="layer of the change file, when it holds several")
    p.add_argument("--grid", required=True, help="a raster on the tile grid (the cube)")
    p.add_argument("--resampling", choices=("auto", "nearest", "mode"), default="auto",
                   help="raster cells onto the grid: auto takes nearest onto a finer grid, mode onto a coarser one "
                        "(polygons are burnt by pixel centre)")
    _nomenclature_args(p)
    p.add_argument("--out", required=True, help="class raster (COG) to write")
    p.set_defaults(func=cmd_labels)

    p = command("sample", "samples table of one tile-year")
    p.add_argument("--cube", required=True, help="cube written by lcflow cube")
    p.add_argument("--valid", required=True, help="its valid-observation counts")
    p.add_argument("--labels", required=True, help="class raster written by lcflow labels")
    p.add_argument("--tile", required=True, help="MGRS tile id")
    p.add_argument("--year", type=int, required=True, help="year of the cube")
    p.add_argument("--per-class", type=_int_at_least(1), default=500, help="samples per class at most")
    p.add_argument("--min-valid-fraction", type=_share, default=0.5,
                   help="share of time steps with a clear composite a pixel needs")
    p.add_argument("--boundary-px", type=_int_at_least(0), default=1, help="skip pixels this close to another label")
    p.add_argument("--block-px", type=_int_at_least(1), default=32, help="side of the blocks splits are drawn by")
    p.add_argument("--fractions", type=_json_object, help='JSON {"train": 0.6, "val": 0.2, "test": 0.2}, summing to 1')
    p.add_argument("--seed", type=int, default=0, help="sampling and split seed")
    p.add_argument("--patch-px", type=_int_at_least(0), default=0, help="also store a patch of this (odd) size around each sample")
    p.add_argument("--min-per-class", type=_int_at_least(0), default=20,
                   help="warn about a class with fewer samples (it is kept)")
    p.add_argument("--min-label-probability", type=_share, default=0.4,
                   help="drop train/val samples whose label gets a lower out-of-fold probability while another class "
                        "is likelier (0: no cleaning)")
    p.add_argument("--clean-folds", type=_int_at_least(2), default=5, help="folds (by spatial block) of the cleaning")
    p.add_argument("--max-drop-fraction", type=_share, default=0.5, help="cleaning drops at most this share of a class")
    p.add_argument("--clean-reference-data", action="store_true",
                   help="clean labels from your own reference data too (by default only CORINE labels are cleaned)")
    p.add_argument("--reference-cube", help="cube of the year the labels show, when --year is another: samples "
                                            "whose series changed since then are dropped from train/val")
    p.add_argument("--change-mad-k", type=_non_negative, default=3.0,
                   help="changed: distance between years above the class median + K robust standard deviations")
    p.add_argument("--out", required=True, help="samples table (parquet) to write")
    p.set_defaults(func=cmd_sample)

    p = command("train", "train a model on samples table(s)", epilog=_model_epilog())
    p.add_argument("--model", required=True, choices=list(REGISTRY), help="model to train")
    p.add_argument("--samples", required=True, nargs="+", help="samples table(s), parquet")
    p.add_argument("--out", required=True, help="model directory")
    p.add_argument("--params", help="model parameters as a JSON object (as the workflow passes them)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="a model parameter, over --params (repeatable; the list is below)")
    p.add_argument("--tuned", metavar="BEST_PARAMS_YAML",
                   help="parameters found by lcflow tune-summary, over --params and --set; recorded in metrics.json")
    p.set_defaults(func=cmd_train)

    p = command("tune", "one worker of a hyperparameter study (start several on one --study to share it)",
                epilog=_tune_epilog())
    p.add_argument("--model", required=True, choices=list(REGISTRY), help="model to tune")
    p.add_argument("--samples", required=True, nargs="+", help="samples table(s), parquet; val rows are carved from "
                                                                "train where there are none")
    p.add_argument("--study", required=True, help="study directory (journal, heartbeats); shared by the workers")
    p.add_argument("--trials", required=True, type=_int_at_least(1),
                   help="the study's budget: finished (complete or pruned) trials, over all workers and reruns")
    p.add_argument("--space", help="search space YAML: {param: {low, high[, log, step]} or {choices: [...]}} "
                                   "(default: the model's space, below)")
    p.add_argument("--space-json", type=_json_object, help="the search space as a JSON object (as the workflow "
                                                              "passes it), instead of --space")
    p.add_argument("--params", help="fixed model parameters as a JSON object")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="a fixed model parameter, over --params")
    p.add_argument("--worker", help="this worker's id, recorded in each trial (default: host-pid); a worker "
                                    "restarted with the same id marks its own abandoned trial failed at once")
    p.add_argument("--sampler", choices=("tpe", "random"), default="tpe", help="how parameters are drawn")
    p.add_argument("--pruner", choices=("successive_halving", "hyperband", "median", "none"),
                   default="successive_halving", help="how unpromising trials are stopped early")
    p.add_argument("--min-rounds", type=_int_at_least(1), default=4,
                   help="validation rounds a trial runs before it can be pruned")
    p.add_argument("--reduction-factor", type=_int_at_least(2), default=3,
                   help="successive halving / Hyperband: 1 in this many trials goes on at each rung")
    p.add_argument("--seed", type=int, default=0, help="sampler seed (each worker derives its own from it)")
    p.add_argument("--metric", choices=("overall_accuracy", "balanced_accuracy"), default="overall_accuracy",
                   help="what trials are compared on, on the val rows")
    p.add_argument("--timeout-minutes", type=_positive_float, help="start no trial after this long")
    p.add_argument("--storage", help="RDB URL (e.g. postgresql://...) instead of the journal file in --study")
    p.add_argument("--out", help="this worker's summary (JSON) to write")
    p.set_defaults(func=cmd_tune)

    p = command("tune-summary", "best parameters, every trial and figures of a study")
    p.add_argument("--model", choices=list(REGISTRY), help="the model whose study to summarise, where the "
                                                           "storage holds several (default: the latest study)")
    p.add_argument("--study", required=True, help="study directory written by lcflow tune")
    p.add_argument("--storage", help="RDB URL the study was run on, if not the journal file")
    p.add_argument("--out", required=True, help="best parameters (YAML) to write; trials.csv and the figures "
                                                "go beside it")
    p.add_argument("--no-figures", action="store_true", help="skip the figures")
    p.set_defaults(func=cmd_tune_summary)

    p = command("evaluate", "score a trained model on samples table(s)")
    p.add_argument("--model-dir", required=True, help="directory written by lcflow train")
    p.add_argument("--samples", required=True, nargs="+", help="samples table(s): the test rows, or all without a split")
    p.add_argument("--out", required=True, help="metrics JSON to write")
    p.set_defaults(func=cmd_evaluate)

    p = command("predict", "map a whole cube")
    p.add_argument("--model-dir", required=True, help="directory written by lcflow train")
    p.add_argument("--cube", required=True, help="cube written by lcflow cube")
    p.add_argument("--out", required=True, help="class map (COG) to write")
    p.add_argument("--confidence", required=True, help="confidence map (COG, percent) to write")
    p.add_argument("--block", type=_int_at_least(16), default=256, help="prediction window, pixels a side")
    p.add_argument("--probabilities", help="also write every class's probability (GeoTIFF, one band a class), "
                                           "the input of consistent-maps")
    p.set_defaults(func=cmd_predict)

    p = command("consistent-maps", "consistent annual maps of one tile and model from every year's probabilities, "
                                   "with change maps")
    p.add_argument("--probabilities", nargs="+", required=True, help="probability rasters of lcflow predict, one a year")
    p.add_argument("--years", nargs="+", type=int, required=True, help="their years, in the same order")
    p.add_argument("--out", nargs="+", required=True, help="consistent class maps (COG) to write, one a year")
    p.add_argument("--confidence", nargs="+", required=True, help="their confidence maps (COG, percent)")
    p.add_argument("--changes", nargs="*", help="change maps (COG, from-to codes) to write, one per pair of "
                                                "consecutive years")
    p.add_argument("--summary", required=True, help="JSON to write: agreement, change matrices, truth scores")
    p.add_argument("--evidence-ratio", type=_float_above(1), default=4.0,
                   help="how many times more likely a class change must be than keeping the class")
    p.add_argument("--min-change-ha", type=_non_negative, default=0.1,
                   help="smallest patch of change kept, hectares (0: every changed pixel)")
    p.add_argument("--truth", nargs="*", help="truth rasters of CLC level-3 codes, one a year (the demo)")
    _nomenclature_args(p)
    p.add_argument("--block", type=_int_at_least(16), default=256, help="window, pixels a side")
    p.set_defaults(func=cmd_consistent_maps)

    p = command("design-sample", "a stratified random sample of reference points from a map, to label independently")
    p.add_argument("--map", required=True, help="class map written by lcflow predict: its classes are the strata")
    p.add_argument("--out", required=True, help="GeoPackage of points to write (map CRS; an empty 'reference' column)")
    p.add_argument("--csv", help="also write the points as CSV (with lon/lat)")
    p.add_argument("--target-se", type=_float_above(0), default=0.01,
                   help="standard error of overall accuracy aimed at (Cochran's sample size)")
    p.add_argument("--min-per-class", type=_int_at_least(2), default=50, help="points per map class at least")
    p.add_argument("--users-accuracy", type=_share, default=0.8, help="guess of every class's user's accuracy")
    p.add_argument("--class-users-accuracy", nargs="*", default=[], metavar="CODE=U",
                   help="guesses for single classes, e.g. 512=0.95 133=0.5")
    p.add_argument("--seed", type=int, default=0, help="draw seed")
    p.set_defaults(func=cmd_design_sample)

    p = command("quicklook", "picture of a map for the report: classes with a legend, and the confidence")
    p.add_argument("--map", required=True, help="class map written by lcflow predict")
    p.add_argument("--confidence", required=True, help="its confidence map")
    p.add_argument("--out", required=True, help="PNG to write")
    p.add_argument("--max-px", type=_int_at_least(16), default=1024, help="longest side of the picture, in pixels")
    p.set_defaults(func=cmd_quicklook)

    p = command("change-figure", "picture of a change map beside its change matrix, for the report")
    p.add_argument("--change", required=True, help="change map written by lcflow consistent-maps")
    p.add_argument("--summary", required=True, help="its summary JSON")
    p.add_argument("--title", default="", help="what the series is (tile, model)")
    p.add_argument("--out", required=True, help="PNG to write")
    p.add_argument("--max-px", type=_int_at_least(16), default=1024, help="longest side of the map, in pixels")
    p.set_defaults(func=cmd_change_figure)

    p = command("stac-item", "STAC Item of a class map (with its confidence) or of a change map")
    p.add_argument("--map", help="class map (COG)")
    p.add_argument("--confidence", help="its confidence map")
    p.add_argument("--year", type=int, help="the map's year")
    p.add_argument("--model-dir", help="the model that made it")
    p.add_argument("--manifest", help="the tile-year's scenes (items.json of lcflow search)")
    p.add_argument("--assessment", help="its assessment JSON")
    p.add_argument("--quicklook", help="its quicklook PNG")
    p.add_argument("--change", help="a change map instead (COG of lcflow consistent-maps)")
    p.add_argument("--summary", help="the change map's summary JSON")
    p.add_argument("--model", help="the change map's model")
    p.add_argument("--tile", required=True, help="MGRS tile")
    p.add_argument("--catalog", required=True, help="the catalog the Item will belong to (for its links)")
    p.add_argument("--out", required=True, help="Item JSON to write")
    p.set_defaults(func=cmd_stac_item)

    p = command("stac-catalog", "static STAC catalog of Items")
    p.add_argument("--items", nargs="+", required=True, help="Item JSON files")
    p.add_argument("--title", default="lcflow", help="what the products are")
    p.add_argument("--out", required=True, help="catalog.json to write")
    p.set_defaults(func=cmd_stac_catalog)

    p = command("summarize-changes", "table of the change between years of every consistent map series")
    p.add_argument("--summaries", nargs="+", required=True, help="summary JSON files of lcflow consistent-maps")
    p.add_argument("--out", required=True, help="TSV to write")
    p.set_defaults(func=cmd_summarize_changes)

    p = command("learning-curve", "loss and accuracy of a deep model's training, per round, as a PNG")
    p.add_argument("--history", required=True, help="history.csv written by lcflow train")
    p.add_argument("--title", default="", help="title of the figure")
    p.add_argument("--out", required=True, help="PNG to write")
    p.set_defaults(func=cmd_learning_curve)

    p = command("label-reference", "demo: label reference points from a truth raster, as an interpreter would")
    p.add_argument("--points", required=True, help="points written by lcflow design-sample")
    p.add_argument("--truth", required=True, help="truth raster of CLC level-3 codes")
    _nomenclature_args(p)
    p.add_argument("--out", required=True, help="labelled points (GeoPackage) to write")
    p.set_defaults(func=cmd_label_reference)

    p = command("assess", "accuracy of a map: reference sample, test samples, truth")
    p.add_argument("--model-dir", required=True, help="directory written by lcflow train")
    p.add_argument("--samples", required=True, help="samples table of the map's tile-year")
    p.add_argument("--map", required=True, help="class map written by lcflow predict")
    p.add_argument("--reference", help="labelled reference points (lcflow design-sample, labelled; any CRS): "
                                       "accuracy and class areas with 95 %% intervals")
    p.add_argument("--reference-column", default="reference", help="column of reference class codes")
    p.add_argument("--truth", help="truth raster of CLC level-3 codes on the map's grid")
    _nomenclature_args(p)
    p.add_argument("--figure", help="confusion matrix PNG to write")
    p.add_argument("--areas-figure", help="class areas PNG to write (mapped, and estimated from the reference sample)")
    p.add_argument("--out", required=True, help="assessment JSON to write")
    p.set_defaults(func=cmd_assess)

    p = command("summarize", "table of all assessments")
    p.add_argument("--assessments", nargs="+", required=True, help="assessment JSON files")
    p.add_argument("--out", required=True, help="TSV to write")
    p.set_defaults(func=cmd_summarize)

    p = command("check-config", "check a workflow configuration as the workflow does before any job")
    p.add_argument("--configfile", nargs="+", help="config file(s), merged in order (default: config/config.yaml "
                                                    "of this checkout)")
    p.add_argument("--directory", default=".", help="directory the config's relative paths start from")
    p.set_defaults(func=cmd_check_config)
    return ap


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _terminate(signum, frame):
    """SIGTERM (Slurm's scancel, Snakemake cancelling a job) unwinds like an error: staging files go."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already written in one line
        return exc.code if isinstance(exc.code, int) else BAD_INPUT
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    log.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        args.func(args)
    except LcflowError as exc:
        log.debug("%s failed", args.command, exc_info=True)
        print(f"lcflow {args.command}: error: {_one_line(str(exc))}", file=sys.stderr)
        return BAD_INPUT
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # a library's error: one line here, the traceback in the log (-v)
        log.debug("%s failed", args.command, exc_info=True)
        hint = "" if args.verbose else " (run with -v for the traceback)"
        print(f"lcflow {args.command}: error: {type(exc).__name__}: {_one_line(str(exc))[:500]}{hint}", file=sys.stderr)
        return FAILED
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
