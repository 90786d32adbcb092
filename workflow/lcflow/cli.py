"""``lcflow <stage>``: every stage of the workflow as a command, the same on a laptop, in a test, in a Slurm job."""

import argparse
import json
import logging
import sys
from pathlib import Path

from .errors import LcflowError

log = logging.getLogger("lcflow")


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",")]


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")] if text else []


def _nomenclature(args):
    from . import nomenclature

    return nomenclature.load(args.level, args.mapping)


def cmd_synth(a):
    from .synth.demo import make_demo

    aoi = json.loads(a.aoi)
    make_demo(a.out, aoi, a.years, resolution=a.resolution, acquisitions=tuple(a.acquisitions),
              mmu_cells=a.mmu_cells, change_fraction=a.change_fraction)
    log.info("demo data written under %s", a.out)


def cmd_search(a):
    from . import search

    n = search.run(a.tile, a.year, a.out, catalog=a.catalog, api=a.api, collection=a.collection,
                   max_cloud_cover=a.max_cloud_cover)
    log.info("%s %s: %d items -> %s", a.tile, a.year, n, a.out)


def cmd_cube(a):
    from . import cube

    grid = cube.run(a.items, a.tile, a.year, a.out, a.valid, bands=a.bands.split(","), resolution=a.resolution,
                    bounds=_floats(a.bounds) if a.bounds else None, invalid_scl=_ints(a.invalid_scl),
                    dilation_px=a.dilation_px, steps=a.time_steps, block=a.block)
    log.info("%s %s: cube %d x %d px (%s) -> %s", a.tile, a.year, grid.width, grid.height, grid.crs, a.out)


def cmd_labels(a):
    from . import labels

    labels.run(a.corine, a.grid, a.out, _nomenclature(a))
    log.info("labels -> %s", a.out)


def cmd_sample(a):
    from . import sampling

    frame = sampling.run(a.cube, a.valid, a.labels, a.out, tile=a.tile, year=a.year, per_class=a.per_class,
                         min_valid_fraction=a.min_valid_fraction, boundary_px=a.boundary_px, block_px=a.block_px,
                         fractions=json.loads(a.fractions) if a.fractions else None, seed=a.seed,
                         patch_px=a.patch_px)
    log.info("%d samples (%s) -> %s", len(frame), frame["split"].value_counts().to_dict(), a.out)


def cmd_train(a):
    from . import training

    metrics = training.train(a.model, a.samples, a.out, training.parse_overrides(a.set or []))
    test = metrics.get("test")
    log.info("%s trained -> %s%s", a.model, a.out,
             f"; test OA {test['overall_accuracy']:.4f}, kappa {test['kappa']:.4f}" if test else "")


def cmd_evaluate(a):
    from . import training

    r = training.evaluate(a.model_dir, a.samples, a.out)
    log.info("OA %.4f, kappa %.4f, macro F1 %.4f on %d samples -> %s", r["overall_accuracy"], r["kappa"],
             r["macro_f1"], r["n_samples"], a.out)


def cmd_predict(a):
    from . import predict

    predict.run(a.model_dir, a.cube, a.out, a.confidence, block=a.block)
    log.info("map -> %s, confidence -> %s", a.out, a.confidence)


def cmd_assess(a):
    from . import assess

    nomen = _nomenclature(a) if a.truth else None
    r = assess.run(a.model_dir, a.samples, a.map, a.out, truth=a.truth, nomenclature=nomen, figure=a.figure)
    parts = [f"{k}: OA {v['overall_accuracy']:.4f}" for k, v in r.items() if isinstance(v, dict)]
    log.info("%s: %s", a.map, ", ".join(parts))


def cmd_summarize(a):
    from . import assess

    sys.stdout.write(assess.summarize(a.assessments, a.out))


def _nomenclature_args(p):
    p.add_argument("--level", type=int, default=2, help="CORINE level 1, 2 or 3 (default 2)")
    p.add_argument("--mapping", help="custom nomenclature CSV (clc_code,class_code,class_name[,red,green,blue])")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lcflow", description=__doc__)
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("synth", help="write the synthetic demo: STAC catalog of scenes, CORINE, truth")
    p.add_argument("--out", required=True)
    p.add_argument("--aoi", required=True, help='JSON {"31UFT": [xmin, ymin, xmax, ymax], ...} in each tile\'s UTM CRS')
    p.add_argument("--years", type=int, nargs="+", required=True)
    p.add_argument("--resolution", type=float, default=10.0)
    p.add_argument("--acquisitions", type=int, nargs=2, default=[12, 20], metavar=("MIN", "MAX"))
    p.add_argument("--mmu-cells", type=int, default=4)
    p.add_argument("--change-fraction", type=float, default=0.03)
    p.set_defaults(func=cmd_synth)

    p = sub.add_parser("search", help="STAC search of one tile and year -> items.json manifest")
    p.add_argument("--tile", required=True)
    p.add_argument("--year", type=int, required=True)
    p.add_argument("--catalog", help="local static STAC catalog.json")
    p.add_argument("--api", help="STAC API root URL")
    p.add_argument("--collection", default="sentinel-2-l2a")
    p.add_argument("--max-cloud-cover", type=float, default=100.0)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("cube", help="cloud-masked composites on a regular time grid")
    p.add_argument("--items", required=True)
    p.add_argument("--tile", required=True)
    p.add_argument("--year", type=int, required=True)
    p.add_argument("--bands", default="B02,B03,B04,B05,B06,B07,B08,B8A,B11,B12")
    p.add_argument("--resolution", type=float, default=10.0)
    p.add_argument("--bounds", help="xmin,ymin,xmax,ymax in the tile's CRS (default: the whole tile)")
    p.add_argument("--invalid-scl", default="0,1,3,8,9,10")
    p.add_argument("--dilation-px", type=int, default=1)
    p.add_argument("--time-steps", type=int, default=12)
    p.add_argument("--block", type=int, default=512)
    p.add_argument("--out", required=True)
    p.add_argument("--valid", required=True, help="output: valid-observation count per time step")
    p.set_defaults(func=cmd_cube)

    p = sub.add_parser("labels", help="CORINE on the tile grid, in the configured nomenclature")
    p.add_argument("--corine", required=True)
    p.add_argument("--grid", required=True, help="a raster on the tile grid (the cube)")
    _nomenclature_args(p)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_labels)

    p = sub.add_parser("sample", help="samples table of one tile-year")
    p.add_argument("--cube", required=True)
    p.add_argument("--valid", required=True)
    p.add_argument("--labels", required=True)
    p.add_argument("--tile", required=True)
    p.add_argument("--year", type=int, required=True)
    p.add_argument("--per-class", type=int, default=500)
    p.add_argument("--min-valid-fraction", type=float, default=0.5)
    p.add_argument("--boundary-px", type=int, default=1)
    p.add_argument("--block-px", type=int, default=32)
    p.add_argument("--fractions", help='JSON {"train": 0.6, "val": 0.2, "test": 0.2}')
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--patch-px", type=int, default=0, help="also store a patch of this (odd) size around each sample")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser("train", help="train a model on samples table(s)")
    p.add_argument("--model", required=True)
    p.add_argument("--samples", required=True, nargs="+")
    p.add_argument("--out", required=True, help="model directory")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="model parameter (repeatable)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("evaluate", help="score a trained model on samples table(s)")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--samples", required=True, nargs="+")
    p.add_argument("--out", required=True, help="metrics JSON")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("predict", help="map a whole cube")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--cube", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--confidence", required=True)
    p.add_argument("--block", type=int, default=256)
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("assess", help="accuracy of a map on test samples (and truth)")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--samples", required=True)
    p.add_argument("--map", required=True)
    p.add_argument("--truth")
    _nomenclature_args(p)
    p.add_argument("--figure")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_assess)

    p = sub.add_parser("summarize", help="table of all assessments")
    p.add_argument("--assessments", nargs="+", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_summarize)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        args.func(args)
    except LcflowError as exc:
        print(f"lcflow {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
