"""``lcflow synth`` and ``lcflow label-reference``: the demo's synthetic data and its reference labels."""

import logging

from lcflow.common import cli_args, path_guard
from lcflow.defaults import default
from lcflow.labels.commands import nomenclature_of, nomenclature_options

log = logging.getLogger("lcflow")


def cmd_synth(a):
    from lcflow.synth.demo import make_demo

    make_demo(a.out, a.aoi, a.years, resolution=a.resolution, acquisitions=tuple(a.acquisitions),
              mmu_cells=a.mmu_cells, change_fraction=a.change_fraction)
    log.info("demo data written under %s", a.out)


def cmd_label_reference(a):
    from lcflow.synth.reference import label_from_truth

    n = label_from_truth(a.points, a.truth, a.out, nomenclature_of(a))
    log.info("%d reference points labelled from %s -> %s", n, a.truth, a.out)


def register(command) -> None:
    """Add this stage's commands; ``command(name, help, **kw)`` makes one sub-parser."""
    p = command("synth", "write the synthetic demo: STAC catalog of scenes, CORINE, truth")
    p.add_argument("--out", required=True, type=path_guard.output_dir, help="directory of the demo data")
    p.add_argument("--aoi", required=True, type=cli_args.json_object,
                   help='JSON {"31UFT": [xmin, ymin, xmax, ymax], ...} in each tile\'s UTM CRS')
    p.add_argument("--years", type=int, nargs="+", required=True, help="years of scenes (the first has CORINE)")
    p.add_argument("--resolution", **cli_args.from_config("cube.resolution"), help="metres per pixel of the 10 m bands")
    p.add_argument("--acquisitions", type=cli_args.int_at_least(1), nargs=2, default=default("demo.acquisitions"), metavar=("MIN", "MAX"),
                   help="fewest and most acquisitions a year")
    p.add_argument("--mmu-cells", **cli_args.from_config("demo.mmu_cells"), help="minimum mapping unit of CORINE, 100 m cells")
    p.add_argument("--change-fraction", **cli_args.from_config("demo.change_fraction"), help="share of the area that changes class")
    p.set_defaults(func=cmd_synth)

    p = command("label-reference", "demo: label reference points from a truth raster, as an interpreter would")
    p.add_argument("--points", required=True, type=path_guard.input_file, help="points written by lcflow design-sample")
    p.add_argument("--truth", required=True, type=path_guard.input_file, help="truth raster of CLC level-3 codes")
    nomenclature_options(p)
    p.add_argument("--out", required=True, type=path_guard.output_file, help="labelled points (GeoPackage) to write")
    p.set_defaults(func=cmd_label_reference)

