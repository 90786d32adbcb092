"""``lcflow predict`` and what is made of its maps: consistent series, change maps, quicklooks, STAC items."""

import logging
from pathlib import Path

from lcflow.common import cli_args, path_guard
from lcflow.errors import LcflowError
from lcflow.labels.commands import nomenclature_of, nomenclature_options
from lcflow.maps.consistency_settings import ConsistencySettings
from lcflow.train.commands import backend_of, backend_option

log = logging.getLogger("lcflow")


def cmd_predict(a):
    from lcflow.maps import predict

    predict.run(
        a.model_dir,
        a.cube,
        a.out,
        a.confidence,
        block=a.block,
        out_probabilities=a.probabilities,
        backend=backend_of(a),
        out_timing=a.timing,
    )
    log.info(
        "map -> %s, confidence -> %s%s",
        a.out,
        a.confidence,
        f", probabilities -> {a.probabilities}" if a.probabilities else "",
    )


def cmd_blend_maps(a):
    from lcflow.maps import blend_maps

    blend_maps.run(
        a.model_dir,
        a.member_probabilities,
        a.out,
        a.confidence,
        out_probabilities=a.probabilities,
        member_timings=a.member_timings,
        out_timing=a.timing,
        block=a.block,
    )
    log.info(
        "blended map -> %s, confidence -> %s%s",
        a.out,
        a.confidence,
        f", probabilities -> {a.probabilities}" if a.probabilities else "",
    )


def cmd_consistent_maps(a):
    from lcflow.maps import consistent

    if len(a.years) != len(a.probabilities):
        raise LcflowError(
            f"--years names {len(a.years)} years for {len(a.probabilities)} --probabilities"
        )
    nomen = nomenclature_of(a) if a.truth else None
    out = consistent.SeriesOutputs.of(a.out, a.confidence, a.changes or [], a.summary)
    consistent.run(
        a.probabilities,
        a.years,
        out,
        ConsistencySettings.from_options(a),
        block=a.block,
        truths=a.truth,
        nomenclature=nomen,
    )


def cmd_quicklook(a):
    from lcflow.maps import quicklook

    quicklook.write(a.map, a.confidence, a.out, Path(a.map).stem, a.max_px)
    log.info("quicklook -> %s", a.out)


def cmd_change_figure(a):
    from lcflow.maps import quicklook

    quicklook.change_figure(a.change, a.summary, a.out, a.title, max_px=a.max_px)


def cmd_summarize_changes(a):
    from lcflow.common.atomic import write_text
    from lcflow.maps import change_summary

    write_text(a.out, change_summary.summary_table(a.summaries))
    log.info("%d series -> %s", len(a.summaries), a.out)


def cmd_stac_item(a):
    from lcflow.maps import stac_items

    needed = (
        ("summary", "model") if a.change else ("map", "confidence", "year", "model_dir", "manifest")
    )
    missing = [f"--{k.replace('_', '-')}" for k in needed if getattr(a, k) is None]
    if missing:
        raise LcflowError(
            f"an Item of a {'change' if a.change else 'class'} map needs {' '.join(missing)}"
        )
    if a.change:
        item = stac_items.change_item(Path(a.change), a.tile, a.model, Path(a.summary))
    else:
        item = stac_items.map_item(
            Path(a.map),
            Path(a.confidence),
            a.tile,
            a.year,
            Path(a.model_dir),
            Path(a.manifest),
            Path(a.assessment) if a.assessment else None,
            Path(a.quicklook) if a.quicklook else None,
        )
    stac_items.write_item(item, a.out, a.catalog)
    log.info("STAC Item %s -> %s", item.id, a.out)


def cmd_stac_catalog(a):
    from lcflow.maps import stac_items

    stac_items.write_catalog(a.items, a.out, a.title)
    log.info("catalog of %d Items -> %s", len(a.items), a.out)


def _predict(command) -> None:
    p = command("predict", "map a whole cube")
    p.add_argument(
        "--model-dir",
        required=True,
        type=path_guard.input_dir,
        help="directory written by lcflow train or lcflow blend",
    )
    p.add_argument(
        "--cube", required=True, type=path_guard.input_file, help="cube written by lcflow cube"
    )
    p.add_argument(
        "--out", required=True, type=path_guard.output_file, help="class map (COG) to write"
    )
    p.add_argument(
        "--confidence",
        required=True,
        type=path_guard.output_file,
        help="confidence map (COG, percent) to write",
    )
    p.add_argument(
        "--block",
        **cli_args.from_config("predict.block_px"),
        help="prediction window, pixels a side",
    )
    p.add_argument(
        "--probabilities",
        type=path_guard.output_file,
        help="also write every class's probability (GeoTIFF, one band a class), "
        "the input of consistent-maps",
    )
    p.add_argument(
        "--timing",
        type=path_guard.output_file,
        help="JSON to write: the mapping's wall time and pixels per second "
        "(read by compare-models)",
    )
    backend_option(p)
    p.set_defaults(func=cmd_predict)


def _blend_maps(command) -> None:
    p = command(
        "blend-maps",
        "a blend's map of one tile-year from its members' probabilities (lcflow predict "
        "--probabilities), without mapping the cube again",
    )
    p.add_argument(
        "--model-dir",
        required=True,
        type=path_guard.input_dir,
        help="directory written by lcflow blend",
    )
    p.add_argument(
        "--member-probabilities",
        nargs="+",
        required=True,
        type=path_guard.input_file,
        help="each member's probabilities raster of the tile-year (any order)",
    )
    p.add_argument(
        "--out", required=True, type=path_guard.output_file, help="class map (COG) to write"
    )
    p.add_argument(
        "--confidence",
        required=True,
        type=path_guard.output_file,
        help="confidence map (COG, percent) to write",
    )
    p.add_argument(
        "--probabilities",
        type=path_guard.output_file,
        help="also write the blend's probabilities, as lcflow predict does",
    )
    p.add_argument(
        "--member-timings",
        nargs="+",
        type=path_guard.input_file,
        help="each member's timing file of the tile-year (lcflow predict "
        "--timing): the blend's timing adds them to its own",
    )
    p.add_argument(
        "--timing",
        type=path_guard.output_file,
        help="JSON to write (with --member-timings): what the blend's map took, members included",
    )
    p.add_argument(
        "--block", **cli_args.from_config("predict.block_px"), help="window, pixels a side"
    )
    p.set_defaults(func=cmd_blend_maps)


def _consistent_maps(command) -> None:
    p = command(
        "consistent-maps",
        "consistent annual maps of one tile and model from every year's probabilities, "
        "with change maps",
    )
    p.add_argument(
        "--probabilities",
        nargs="+",
        required=True,
        type=path_guard.input_file,
        help="probability rasters of lcflow predict, one a year",
    )
    p.add_argument(
        "--years", nargs="+", type=int, required=True, help="their years, in the same order"
    )
    p.add_argument(
        "--out",
        nargs="+",
        required=True,
        type=path_guard.output_file,
        help="consistent class maps (COG) to write, one a year",
    )
    p.add_argument(
        "--confidence",
        nargs="+",
        required=True,
        type=path_guard.output_file,
        help="their confidence maps (COG, percent)",
    )
    p.add_argument(
        "--changes",
        nargs="*",
        type=path_guard.output_file,
        help="change maps (COG, from-to codes) to write, one per pair of consecutive years",
    )
    p.add_argument(
        "--summary",
        required=True,
        type=path_guard.output_file,
        help="JSON to write: agreement, change matrices, truth scores",
    )
    ConsistencySettings.add_options(p)
    p.add_argument(
        "--truth",
        nargs="*",
        type=path_guard.input_file,
        help="truth rasters of CLC level-3 codes, one a year (the demo)",
    )
    nomenclature_options(p)
    p.add_argument(
        "--block", **cli_args.from_config("predict.block_px"), help="window, pixels a side"
    )
    p.set_defaults(func=cmd_consistent_maps)


def _quicklook(command) -> None:
    p = command(
        "quicklook", "picture of a map for the report: classes with a legend, and the confidence"
    )
    p.add_argument(
        "--map",
        required=True,
        type=path_guard.input_file,
        help="class map written by lcflow predict",
    )
    p.add_argument(
        "--confidence", required=True, type=path_guard.input_file, help="its confidence map"
    )
    p.add_argument("--out", required=True, type=path_guard.output_file, help="PNG to write")
    p.add_argument(
        "--max-px",
        type=cli_args.int_at_least(16),
        default=1024,
        help="longest side of the picture, in pixels",
    )
    p.set_defaults(func=cmd_quicklook)


def _change_figure(command) -> None:
    p = command("change-figure", "picture of a change map beside its change matrix, for the report")
    p.add_argument(
        "--change",
        required=True,
        type=path_guard.input_file,
        help="change map written by lcflow consistent-maps",
    )
    p.add_argument("--summary", required=True, type=path_guard.input_file, help="its summary JSON")
    p.add_argument("--title", default="", help="what the series is (tile, model)")
    p.add_argument("--out", required=True, type=path_guard.output_file, help="PNG to write")
    p.add_argument(
        "--max-px",
        type=cli_args.int_at_least(16),
        default=1024,
        help="longest side of the map, in pixels",
    )
    p.set_defaults(func=cmd_change_figure)


def _summarize_changes(command) -> None:
    p = command(
        "summarize-changes", "table of the change between years of every consistent map series"
    )
    p.add_argument(
        "--summaries",
        nargs="+",
        required=True,
        type=path_guard.input_file,
        help="summary JSON files of lcflow consistent-maps",
    )
    p.add_argument("--out", required=True, type=path_guard.output_file, help="TSV to write")
    p.set_defaults(func=cmd_summarize_changes)


def _stac_item(command) -> None:
    p = command("stac-item", "STAC Item of a class map (with its confidence) or of a change map")
    p.add_argument("--map", type=path_guard.input_file, help="class map (COG)")
    p.add_argument("--confidence", type=path_guard.input_file, help="its confidence map")
    p.add_argument("--year", type=int, help="the map's year")
    p.add_argument("--model-dir", type=path_guard.input_dir, help="the model that made it")
    p.add_argument(
        "--manifest",
        type=path_guard.input_file,
        help="the tile-year's scenes (items.json of lcflow search)",
    )
    p.add_argument("--assessment", type=path_guard.input_file, help="its assessment JSON")
    p.add_argument("--quicklook", type=path_guard.input_file, help="its quicklook PNG")
    p.add_argument(
        "--change",
        type=path_guard.input_file,
        help="a change map instead (COG of lcflow consistent-maps)",
    )
    p.add_argument("--summary", type=path_guard.input_file, help="the change map's summary JSON")
    p.add_argument("--model", help="the change map's model")
    p.add_argument("--tile", required=True, help="MGRS tile")
    p.add_argument(
        "--catalog", required=True, help="the catalog the Item will belong to (for its links)"
    )
    p.add_argument("--out", required=True, type=path_guard.output_file, help="Item JSON to write")
    p.set_defaults(func=cmd_stac_item)


def _stac_catalog(command) -> None:
    p = command("stac-catalog", "static STAC catalog of Items")
    p.add_argument(
        "--items", nargs="+", required=True, type=path_guard.input_file, help="Item JSON files"
    )
    p.add_argument("--title", default="lcflow", help="what the products are")
    p.add_argument(
        "--out", required=True, type=path_guard.output_file, help="catalog.json to write"
    )
    p.set_defaults(func=cmd_stac_catalog)


def register(command) -> None:
    """Add this stage's commands; ``command(name, help, **kw)`` makes one sub-parser."""
    for add in (
        _predict,
        _blend_maps,
        _consistent_maps,
        _quicklook,
        _change_figure,
        _summarize_changes,
        _stac_item,
        _stac_catalog,
    ):
        add(command)
