"""``lcflow synth`` and ``lcflow label-reference``: the demo's synthetic data and its reference labels."""

import logging
from pathlib import Path

from lcflow.common import cli_args, path_guard
from lcflow.defaults import default
from lcflow.labels.commands import nomenclature_of, nomenclature_options

log = logging.getLogger("lcflow")


def cmd_synth(a):
    from lcflow.synth.demo import make_demo

    make_demo(
        a.out,
        a.aoi,
        a.years,
        resolution=a.resolution,
        acquisitions=tuple(a.acquisitions),
        mmu_cells=a.mmu_cells,
        change_fraction=a.change_fraction,
    )
    log.info("demo data written under %s", a.out)


def _scenery(a):
    from lcflow.synth.demo import Scenery

    return Scenery(a.first_year, a.resolution, tuple(a.acquisitions), a.change_fraction)


def cmd_synth_scenes(a):
    from lcflow.synth.demo import write_tile_year

    catalog = write_tile_year(a.out, a.tile, a.bounds, a.year, _scenery(a))
    log.info("demo scenes of %s %s -> %s", a.tile, a.year, catalog)


def cmd_synth_corine(a):
    from lcflow.synth.demo import write_corine

    log.info("demo CORINE -> %s", write_corine(a.out, a.aoi, _scenery(a), a.mmu_cells))


def cmd_synth_catalog(a):
    from lcflow.synth.demo import write_root_catalog

    log.info(
        "demo catalogue of %d tile-years -> %s",
        len(a.children),
        write_root_catalog(a.out, a.children),
    )


def _tile_year_outputs(a) -> list[path_guard.Named]:
    """What synth-scenes writes under --out: its tile-year's catalogue folder and truth."""
    from lcflow.synth.demo import tile_year_catalog

    return [
        path_guard.Named(
            "its catalogue",
            str(tile_year_catalog(a.out, a.tile, a.year).parent),
            path_guard.OUTPUT_DIR,
        ),
        path_guard.Named(
            "its truth",
            str(Path(a.out) / "truth" / f"{a.tile}_{a.year}.tif"),
            path_guard.OUTPUT_FILE,
        ),
    ]


def _scenery_options(p, first_year: bool = True) -> None:
    """The demo's scenery: its first year (unless the command's years give it), the pixel size, the
    acquisitions a year and the share of the area that changes."""
    if first_year:
        p.add_argument(
            "--first-year",
            type=int,
            required=True,
            help="the demo's first year (CORINE's, before the change)",
        )
    p.add_argument(
        "--resolution",
        **cli_args.from_config("cube.resolution"),
        help="metres per pixel of the 10 m bands",
    )
    p.add_argument(
        "--acquisitions",
        type=cli_args.int_at_least(1),
        nargs=2,
        default=default("demo.acquisitions"),
        metavar=("MIN", "MAX"),
        help="fewest and most acquisitions a year",
    )
    p.add_argument(
        "--change-fraction",
        **cli_args.from_config("demo.change_fraction"),
        help="share of the area that changes class",
    )


def cmd_label_reference(a):
    from lcflow.synth.reference import label_from_truth

    n = label_from_truth(a.points, a.truth, a.out, nomenclature_of(a))
    log.info("%d reference points labelled from %s -> %s", n, a.truth, a.out)


def register(command) -> None:
    """Add this stage's commands; ``command(name, help, **kw)`` makes one sub-parser."""
    _synth_command(command)
    _synth_scenes_command(command)
    _synth_corine_command(command)
    _synth_catalog_command(command)
    _label_reference_command(command)


def _synth_command(command) -> None:
    """``lcflow synth``."""
    p = command("synth", "write the synthetic demo: STAC catalog of scenes, CORINE, truth")
    p.add_argument(
        "--out", required=True, type=path_guard.output_dir, help="directory of the demo data"
    )
    p.add_argument(
        "--aoi",
        required=True,
        type=cli_args.json_object,
        help='JSON {"31UFT": [xmin, ymin, xmax, ymax], ...} in each tile\'s UTM CRS',
    )
    p.add_argument(
        "--years", type=int, nargs="+", required=True, help="years of scenes (the first has CORINE)"
    )
    _scenery_options(p, first_year=False)  # the first of --years
    p.add_argument(
        "--mmu-cells",
        **cli_args.from_config("demo.mmu_cells"),
        help="minimum mapping unit of CORINE, 100 m cells",
    )
    p.set_defaults(func=cmd_synth)


def _synth_scenes_command(command) -> None:
    """``lcflow synth-scenes``."""
    p = command(
        "synth-scenes",
        "the demo's scenes (a STAC catalogue of their own) and truth of one tile-year",
    )
    p.add_argument("--out", required=True, help="directory of the demo data")
    p.add_argument("--tile", required=True, help="MGRS tile id")
    p.add_argument(
        "--bounds",
        required=True,
        type=cli_args.json_list,
        help="the tile's demo area, JSON [xmin, ymin, xmax, ymax] in its UTM CRS",
    )
    p.add_argument("--year", type=int, required=True, help="year of the scenes")
    _scenery_options(p)
    p.set_defaults(func=cmd_synth_scenes, implied_paths=_tile_year_outputs)


def _synth_corine_command(command) -> None:
    """``lcflow synth-corine``."""
    p = command(
        "synth-corine", "the demo's CORINE raster over every tile's area, of the first year"
    )
    p.add_argument(
        "--out", required=True, help="directory of the demo data (writes corine/clc_demo_3035.tif)"
    )
    p.add_argument(
        "--aoi",
        required=True,
        type=cli_args.json_object,
        help='JSON {"31UFT": [xmin, ymin, xmax, ymax], ...}',
    )
    p.add_argument(
        "--mmu-cells",
        **cli_args.from_config("demo.mmu_cells"),
        help="minimum mapping unit of CORINE, 100 m cells",
    )
    _scenery_options(p)
    p.set_defaults(
        func=cmd_synth_corine,
        implied_paths=lambda a: [
            path_guard.Named(
                "its CORINE",
                str(Path(a.out) / "corine" / "clc_demo_3035.tif"),
                path_guard.OUTPUT_FILE,
            )
        ],
    )


def _synth_catalog_command(command) -> None:
    """``lcflow synth-catalog``."""
    p = command("synth-catalog", "the demo's catalogue: each tile-year's catalogue as a child")
    p.add_argument(
        "--out", required=True, help="directory of the demo data (writes catalog/catalog.json)"
    )
    p.add_argument(
        "--children",
        nargs="+",
        required=True,
        type=path_guard.input_file,
        help="the tile-years' catalogues (lcflow synth-scenes)",
    )
    p.set_defaults(
        func=cmd_synth_catalog,
        implied_paths=lambda a: [
            path_guard.Named(
                "the catalogue",
                str(Path(a.out) / "catalog" / "catalog.json"),
                path_guard.OUTPUT_FILE,
            )
        ],
    )


def _label_reference_command(command) -> None:
    """``lcflow label-reference``."""
    p = command(
        "label-reference",
        "demo: label reference points from a truth raster, as an interpreter would",
    )
    p.add_argument(
        "--points",
        required=True,
        type=path_guard.input_file,
        help="points written by lcflow design-sample",
    )
    p.add_argument(
        "--truth",
        required=True,
        type=path_guard.input_file,
        help="truth raster of CLC level-3 codes",
    )
    nomenclature_options(p)
    p.add_argument(
        "--out",
        required=True,
        type=path_guard.output_file,
        help="labelled points (GeoPackage) to write",
    )
    p.set_defaults(func=cmd_label_reference)
