"""The catalogue of bad inputs: every case ends in one line that names what is wrong, and leaves the
output directory as it must be (nothing written, or the earlier product untouched).

Each case is a row: a name, what it does (after an optional setup that leaves earlier products), a
fragment of the message (30 characters at least), the exit code, and the state of the directory it
guards afterwards. Every case runs through ``lcflow``'s own entry point, config cases through
``lcflow check-config`` (the check the Snakefile runs before any job); its whole message line must be
the one in ``tests/data/bad_input_messages.yaml`` (reviewed lines; a new case adds its own). The cases of
each stage run in ``tests/cli/test_bad_inputs_STAGE.py``; ``tests/cli/test_bad_inputs.py`` runs a few as real
processes, checks the catalogue itself, and mutates a valid config and samples table at random.
New features add their cases here.
"""

import base64
import copy
import datetime as dt
import hashlib
import json
import os
import pickle
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import rasterio
import yaml

from lcflow.cli import main
from lcflow.labels import samples_table as samples

from ..conftest import ROOT, SMALL_AOI, corine_polygons

SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
DEMO = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
THIS_YEAR = dt.date.today().year
MESSAGES = ROOT / "tests" / "data" / "bad_input_messages.yaml"
SMALL = [640000, 5760000, 640320, 5760320]  # 32 x 32 px of 31UFT: cube cases stay fast


@dataclass
class Ctx:
    """What a case may use: a fresh directory, the small demo and its stages, the captured stderr."""

    tmp: Path
    demo: Path
    stages: dict
    capsys: object
    out: Path = field(init=False)
    server: str = "http://no-server"  # a loopback server a case started: {server} in its reviewed line

    def __post_init__(self):
        self.out = self.tmp / "out"

    def lcflow(self, *args) -> tuple[int, list[str]]:
        """Run ``lcflow ARGS`` in this process; its exit code and the lines it wrote to stderr."""
        self.capsys.readouterr()
        code = main([str(a) for a in args])
        return code, self.capsys.readouterr().err.strip().splitlines()


@dataclass
class Case:
    name: str
    run: Callable[[Ctx], tuple[int, list[str]]]
    message: str
    state: str = "absent"  # absent: nothing under ctx.out; unchanged: the guarded directory byte for byte as
    #                        before the run; ok: the command succeeded
    code: int = 2
    setup: Callable[[Ctx], None] | None = None  # what exists before the run (earlier products, input files)
    guards: str = "out"  # the directory an "unchanged" case keeps: out (earlier products) or tmp (everything)


# ---------------------------------------------------------------------------------------------- config


def cfg_case(name: str, change: Callable[[dict, Ctx], None], message: str) -> Case:
    """A change to the demo config that ``lcflow check-config`` (the check before any job) must refuse,
    writing nothing: the case's whole directory stays as the change left it."""

    def setup(ctx: Ctx) -> None:
        cfg = copy.deepcopy(DEMO)
        change(cfg, ctx)
        (ctx.tmp / "c.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))

    def run(ctx: Ctx):
        return ctx.lcflow("check-config", "--configfile", ctx.tmp / "c.yaml", "--directory", ctx.tmp)

    return Case(f"config: {name}", run, message, state="unchanged", setup=setup, guards="tmp")


def _corine_copy(ctx: Ctx, value: int) -> str:
    """The demo's CORINE raster (grid codes, EPSG:3035) with ``value`` in the cell at the centre of 31UFT."""
    from rasterio.warp import transform

    src = ctx.demo / "corine" / "clc_demo_3035.tif"
    with rasterio.open(src) as ds:
        profile, data = ds.profile, ds.read(1)
        x0, y0, x1, y1 = SMALL_AOI["31UFT"]
        xs, ys = transform("EPSG:32631", ds.crs, [(x0 + x1) / 2], [(y0 + y1) / 2])
        row, col = ds.index(xs[0], ys[0])
    data[row, col] = value
    path = ctx.tmp / "clc.tif"
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data, 1)
    return str(path)


def corine_half(ctx: Ctx) -> str:
    """The demo's CORINE raster (grid codes, EPSG:3035) with no data east of the centre of 31UFT's small area."""
    from rasterio.warp import transform

    src = ctx.demo / "corine" / "clc_demo_3035.tif"
    with rasterio.open(src) as ds:
        profile, data = ds.profile, ds.read(1)
        x0, y0, x1, y1 = SMALL_AOI["31UFT"]
        xs, ys = transform("EPSG:32631", ds.crs, [(x0 + x1) / 2], [(y0 + y1) / 2])
        _, col = ds.index(xs[0], ys[0])
    data[:, col:] = profile["nodata"]
    path = ctx.tmp / "clc_half.tif"
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data, 1)
    return str(path)


def _real_corine_config(cfg: dict, ctx: Ctx, corine: str) -> None:
    cfg["labels"]["corine"] = corine


def _demo_polygons(ctx: Ctx, column: str = "Code_18", name: str = "clc.gpkg") -> str:
    """The demo's CORINE raster as polygons, CLC codes as text in ``column``."""
    frame = corine_polygons(ctx.demo / "corine" / "clc_demo_3035.tif", column)
    frame.drop(columns="ID").to_file(ctx.tmp / name)
    return str(ctx.tmp / name)


def _bow_tie(ctx: Ctx) -> str:
    """Two labelled polygons in 31UFT's small area, the first a bow tie (its ring crosses itself)."""
    import geopandas as gpd
    import shapely

    x0, y0 = SMALL_AOI["31UFT"][:2]
    bow = shapely.Polygon([(x0, y0), (x0 + 600, y0 + 600), (x0 + 600, y0), (x0, y0 + 600), (x0, y0)])
    square = shapely.box(x0 + 700, y0, x0 + 1200, y0 + 500)
    gpd.GeoDataFrame({"code": [1, 2]}, geometry=[bow, square], crs=32631).to_file(ctx.tmp / "bow.gpkg")
    (ctx.tmp / "m.csv").write_text("code,class_code,class_name\n1,1,crops\n2,2,forest\n")
    return str(ctx.tmp / "bow.gpkg")


def _lanjaron_polygons(ctx: Ctx) -> str:
    """The real EPSG:3042 CORINE subset (southern Spain) as polygons: nowhere near the demo tiles."""
    corine_polygons(ROOT / "tests" / "data" / "clc_lanjaron_epsg3042.tif").to_file(ctx.tmp / "lanjaron.gpkg")
    return str(ctx.tmp / "lanjaron.gpkg")


def _mixed_geometries(ctx: Ctx) -> str:
    import geopandas as gpd

    polygons = gpd.read_file(_demo_polygons(ctx, "LC"))
    points = polygons.iloc[:5].assign(geometry=polygons.iloc[:5].representative_point())
    path = ctx.tmp / "mixed.gpkg"
    pd.concat([polygons, points]).to_file(path)
    return str(path)


CONFIG_CASES = [
    cfg_case("unknown key", lambda c, x: c.update(colour="red"), "config: unknown key 'colour' in (top level)"),
    cfg_case("consistency that allows any change", lambda c, x: c["consistency"].update(evidence_ratio=1),
             "consistency.evidence_ratio = 1 is outside (1, 1000000]"),
    cfg_case("unknown nested key", lambda c, x: c["sample"].update(per_klass=3), "unknown key 'per_klass' in sample"),
    cfg_case("cube resolution of a tile's width", lambda c, x: c["cube"].update(resolution=125442),
             "config: cube.resolution = 125442 is outside [1, 1000]"),
    cfg_case("thousands of LSTM layers", lambda c, x: c["model_params"]["lstm"].update(num_layers=3916),
             "config: model_params.lstm.num_layers = 3916: expected an integer in [1, 16]"),
    cfg_case("a batch larger than a GPU holds", lambda c, x: c["model_params"]["lstm"].update(batch_size=201241),
             "config: model_params.lstm.batch_size = 201241: expected an integer in [1, 65536]"),
    cfg_case("cleaning threshold over 1", lambda c, x: c["sample"].update(clean={"min_label_probability": 1.4}),
             "sample.clean.min_label_probability"),
    cfg_case("labels year as text", lambda c, x: c["labels"].update(year="2018a"),
             "labels.year = '2018a': '2018a' is not of type 'integer'"),
    cfg_case("bad tile id", lambda c, x: c["tiles"].append("31UFTX"), "tiles[2] = '31UFTX' is not a valid MGRS tile id"),
    cfg_case("no tiles", lambda c, x: c.update(tiles=[]), "config: tiles = []: [] should be non-empty"),
    cfg_case("duplicate tiles", lambda c, x: c["tiles"].append("31UFT"), "['31UFT', '32ULC', '31UFT'] has non-unique elements"),
    cfg_case("year before Sentinel-2", lambda c, x: c["years"].append(2014), "config: years[2] = 2014 is outside [2015, inf)"),
    cfg_case("year in the future", lambda c, x: c["years"].append(THIS_YEAR + 1),
             f"config: years[2] = {THIS_YEAR + 1} is outside 2015..{THIS_YEAR}"),
    cfg_case("unknown model", lambda c, x: c["models"].append("svm"), f"models[{len(DEMO['models'])}] = 'svm' is not one of"),
    cfg_case("hpo: a space with low above high", lambda c, x: c.update(hpo={"models": ["lstm"], "space": {
        "lstm": {"learning_rate": {"low": 0.1, "high": 0.01}}}}), "hpo.space.lstm.learning_rate: low = 0.1 is above high"),
    cfg_case("hpo: a parameter of another model", lambda c, x: c.update(hpo={"models": ["lstm"], "space": {
        "lstm": {"filters": {"low": 8, "high": 64}}}}), "hpo.space.lstm.filters: unknown parameter 'filters' for model lstm"),
    cfg_case("hpo: a log range from zero", lambda c, x: c.update(hpo={"models": ["lstm"], "space": {
        "lstm": {"weight_decay": {"low": 0, "high": 0.1, "log": True}}}}), "weight_decay: a log range needs low > 0, got low = 0.0"),
    cfg_case("hpo: a choice the parameter refuses", lambda c, x: c.update(hpo={"models": ["lstm"], "space": {
        "lstm": {"optimizer": {"choices": ["adamw", "adam"]}}}}),
        "hpo.space.lstm.optimizer.choices: 'adam' is not a value of optimizer"),
    cfg_case("hpo: a run setting searched", lambda c, x: c.update(hpo={"models": ["rf"], "space": {
        "rf": {"n_jobs": {"low": 1, "high": 4}}}}), "n_jobs says how a job runs, not what it learns"),
    cfg_case("hpo: no workers", lambda c, x: c.update(hpo={"models": ["lstm"], "workers": 0}),
             "hpo.workers = 0 is outside [1, 1000]"),
    cfg_case("hpo: a tuned model that is not trained", lambda c, x: c.update(hpo={"models": ["resnet"]}),
             "hpo.models[0] = 'resnet' is not one of models"),
    cfg_case("blend of a model that is not trained",
             lambda c, x: c.update(models=["rf", "lstm", "blend"], blend={"members": ["rf", "tempcnn"]}),
             "blend.members[1] = 'tempcnn' is not one of models"),
    cfg_case("blend of its default members, one not trained", lambda c, x: c.update(models=["rf", "lstm", "blend"]),
             "blend.members[1] = 'tempcnn' (by default) is not one of models"),
    cfg_case("blend of one member", lambda c, x: c.update(blend={"members": ["rf"]}),
             "blend.members = ['rf'] has 1 item(s): at least 2"),
    cfg_case("blend of a patch model", lambda c, x: c.update(blend={"members": ["rf", "resnet"]}),
             "blend.members[1] = 'resnet' is not one of"),
    cfg_case("hpo: an unknown pruner", lambda c, x: c.update(hpo={"models": ["lstm"], "pruner": "asha"}),
             "hpo.pruner = 'asha' is not one of"),
    cfg_case("CORINE level 4", lambda c, x: c["labels"].update(level=4), "labels.level = 4 is not one of"),
    cfg_case("aoi of a malformed tile", lambda c, x: c["aoi"].update({"99ZZZ": [0, 0, 1, 1]}),
             "aoi: key '99ZZZ' is not a valid MGRS tile id"),
    cfg_case("reversed aoi", lambda c, x: c["aoi"].update({"31UFT": [642560, 5760000, 640000, 5762560]}),
             "aoi.31UFT = [642560, 5760000, 640000, 5762560] is not [xmin, ymin, xmax, ymax]"),
    cfg_case("aoi outside its tile", lambda c, x: c["aoi"].update({"31UFT": [800000, 5760000, 802560, 5762560]}),
             "aoi.31UFT = [800000, 5760000, 802560, 5762560]: area [800000, 5760000, 802560, 5762560] is not inside "
             "tile 31UFT"),
    cfg_case("aoi of a misspelt tile", lambda c, x: c["aoi"].update({"31UFU": c["aoi"].pop("31UFT")}),
             "aoi.31UFU: 31UFU is not one of tiles ['31UFT', '32ULC'], and tile 31UFT has no aoi"),
    cfg_case("three-value aoi", lambda c, x: c["aoi"].update({"31UFT": [640000, 5760000, 642560]}),
             "aoi.31UFT = [640000, 5760000, 642560]"),
    cfg_case("missing mapping file", lambda c, x: c["labels"].update(mapping="nope.csv"),
             "labels.mapping = 'nope.csv': file does not exist"),
    cfg_case("missing CORINE file", lambda c, x: c["labels"].update(corine="nope.tif"),
             "labels.corine = 'nope.tif': file does not exist"),
    cfg_case("missing catalog", lambda c, x: c.pop("demo"),
             "stac.catalog = 'resources/demo/catalog/catalog.json': file does not exist"),
    cfg_case("catalog and API", lambda c, x: c["stac"].update(api="https://x"), "config: stac: give exactly one of its alternatives"),
    cfg_case("resnet without patches", lambda c, x: c["models"].append("resnet"),
             "models includes resnet, which trains on patches: set sample.patch_px"),
    cfg_case("even patch size", lambda c, x: c["sample"].update(patch_px=10), "sample.patch_px = 10 must be odd"),
    cfg_case("fractions over 1", lambda c, x: c["sample"].update(fractions={"train": 0.7, "val": 0.2, "test": 0.2}),
             "sample.fractions = {'train': 0.7, 'val': 0.2, 'test': 0.2} sum to 1.1, not 1"),
    cfg_case("fractions under 1", lambda c, x: c["sample"].update(fractions={"train": 0.5, "val": 0.2, "test": 0.2}),
             "'val': 0.2, 'test': 0.2} sum to 0.9, not 1"),
    cfg_case("misspelt model parameter", lambda c, x: c["model_params"]["lstm"].update(hiden_size=32),
             "model_params.lstm: unknown parameter 'hiden_size' for model lstm; known: epochs"),
    cfg_case("shell in a parameter value", lambda c, x: c["model_params"]["rf"].update(criterion="$(touch FILE)"),
             "model_params.rf.criterion = '$(touch FILE)': expected one of gini, entropy, log_loss"),
    cfg_case("backticks in max_features", lambda c, x: c["model_params"]["rf"].update(max_features="`touch FILE`"),
             "model_params.rf.max_features = '`touch FILE`': expected one of sqrt, log2 or an integer in [1, 100000] or a number "
             "in (0, 1] or null"),
    cfg_case("zero epochs", lambda c, x: c["model_params"]["lstm"].update(epochs=0),
             "model_params.lstm.epochs = 0: expected an integer in [1, 10000]"),
    cfg_case("zero batch size", lambda c, x: c["model_params"]["lstm"].update(batch_size=0),
             "model_params.lstm.batch_size = 0: expected an integer in [1, 65536]"),
    cfg_case("unknown optimizer", lambda c, x: c["model_params"]["lstm"].update(optimizer="foo"),
             "model_params.lstm.optimizer = 'foo': expected one of adamw, sgd, lamb"),
    cfg_case("trees not a number", lambda c, x: c["model_params"]["rf"].update(n_estimators="abc"),
             "model_params.rf.n_estimators = 'abc': expected an integer in [1, 10000]"),
    cfg_case("dropout of 1", lambda c, x: c["model_params"]["lstm"].update(dropout=1.0),
             "model_params.lstm.dropout = 1.0: expected a number in [0, 1)"),
    cfg_case("parameters not a mapping", lambda c, x: c["model_params"].update(lstm=5),
             "model_params.lstm = 5: 5 is not of type 'object'"),
    cfg_case("clear-observation floor over 1", lambda c, x: c["cube"].update(min_clear_fraction=2),
             "cube.min_clear_fraction = 2 is outside [0, 1]"),
    cfg_case("CORINE code outside the legend", lambda c, x: _real_corine_config(c, x, _corine_copy(x, 99)),
             "labels.corine: " + "{tmp}/clc.tif in tile 31UFT: value(s) 99 of the CORINE raster are not CORINE codes"),
    cfg_case("CORINE mixing grid and CLC codes", lambda c, x: _real_corine_config(c, x, _corine_copy(x, 112)),
             "the CORINE raster mixes grid codes (1..44: "),
    cfg_case("CORINE not covering the tile",
             lambda c, x: _real_corine_config(c, x, str(ROOT / "tests" / "data" / "clc_lanjaron_epsg3042.tif")),
             "clc_lanjaron_epsg3042.tif does not cover the area of tile 31UFT"),
    cfg_case("CORINE covering a quarter of the tile area",
             lambda c, x: _real_corine_config(c, x, str(x.demo / "corine" / "clc_demo_3035.tif")),
             "gives no class to 76.0 % of the area of tile 31UFT (outside its coverage, no data or unclassified), "
             "above labels.unlabelled_max (75 %)"),
    cfg_case("unlabelled warning above the refusal", lambda c, x: c["labels"].update(unlabelled_warn=0.5, unlabelled_max=0.3),
             "labels.unlabelled_warn = 0.5 is above labels.unlabelled_max = 0.3"),
    cfg_case("CORINE and reference both given", lambda c, x: c["labels"].update(reference="field.gpkg"),
             "labels: give corine (a CORINE raster or vector layer) or reference (your own labelled polygons or points), "
             "exactly one of them (given: corine, reference)"),
    cfg_case("reference without a mapping", lambda c, x: (c["labels"].pop("corine"), c["labels"].update(reference="f.gpkg")),
             "labels.reference needs labels.mapping"),
    cfg_case("CORINE polygons without a Code_NN column", lambda c, x: c["labels"].update(corine=_demo_polygons(x, "code")),
             "labels.corine: {tmp}/clc.gpkg: name one column of CLC codes named like Code_18 with labels.code_column "
             "(columns: code)"),
    cfg_case("CORINE polygons elsewhere", lambda c, x: c["labels"].update(corine=_lanjaron_polygons(x)),
             "labels.corine: CORINE layer {tmp}/lanjaron.gpkg has no feature within the area of tile 31UFT"),
    cfg_case("CORINE codes the mapping leaves out",
             lambda c, x: ((x.tmp / "m.csv").write_text("clc_code,class_code,class_name\n211,1,arable\n"),
                           c["labels"].update(corine=_demo_polygons(x), mapping=str(x.tmp / "m.csv"))),
             "labels.corine: {tmp}/clc.gpkg in tile 31UFT: code(s) 112 ("),
    cfg_case("reference points not there for any tile-year",
             lambda c, x: c["assess"].update(reference="ref/{tile}_{year}.gpkg"),
             "assess.reference = 'ref/{tile}_{year}.gpkg': no file for any tile-year (the first would be "
             "'ref/31UFT_2018.gpkg'): draw the design"),
    cfg_case("labelled reference inside results",
             lambda c, x: c["assess"].update(reference="results/reference/{tile}_{year}_design.gpkg"),
             "assess.reference = 'results/reference/31UFT_2018_design.gpkg' lies inside results/, which the workflow "
             "writes and deletes"),
    cfg_case("a mapping inside the results of a run in the working directory",
             lambda c, x: (c.update(results="."), c["labels"].update(mapping="models/m.csv")),
             "labels.mapping = 'models/m.csv' lies inside models/, which the workflow writes and deletes"),
    cfg_case("the demo's truth beside own labels",
             lambda c, x: (c["labels"].pop("corine"), c["labels"].update(reference="f.gpkg", mapping="m.csv")),
             "assess.truth = 'resources/demo/truth/{tile}_{year}.tif' is a raster of CLC level-3 codes (the demo's "
             "synthetic truth), and labels.reference gives classes of your own nomenclature"),
    cfg_case("design from a model not trained", lambda c, x: c["assess"].update(design={"model": "resnet"}),
             "assess.design.model = 'resnet' is not one of models"),
    cfg_case("design standard error of 0", lambda c, x: c["assess"].update(design={"target_se": 0}),
             "assess.design.target_se = 0 is outside (0, 0.5]"),
    cfg_case("catalog that is not JSON",
             lambda c, x: (c.pop("demo"), c.pop("assess"), (x.tmp / "cat.json").write_text("<html>"),
                           c["stac"].update(catalog="cat.json"),
                           c["labels"].update(corine=str(x.demo / "corine" / "clc_demo_3035.tif"))),
             "stac.catalog = '{tmp}/cat.json' is not a JSON STAC catalog"),
]


def layered_case(name: str, text: Callable[[Ctx], str], message: str = "", code: int = 2) -> Case:
    """A file written as it stands (YAML a dump could not write) layered over the demo config: refused in
    one line, leaving the directory as it was, or (``code`` 0) accepted."""

    def setup(ctx: Ctx) -> None:
        (ctx.tmp / "c.yaml").write_text(yaml.safe_dump(DEMO, sort_keys=False))
        (ctx.tmp / "over.yaml").write_text(text(ctx))

    def run(ctx: Ctx):
        return ctx.lcflow("check-config", "--configfile", ctx.tmp / "c.yaml", ctx.tmp / "over.yaml", "--directory", ctx.tmp)

    return Case(f"config: {name}", run, message, state="unchanged" if code else "ok", code=code, setup=setup, guards="tmp")


def _alias_bomb(levels: int = 16, width: int = 9) -> str:
    """A few hundred bytes of YAML whose aliases nest into width ** levels paths (the billion laughs)."""
    lines = ["bomb:", "  l0: &l0 [" + ", ".join(["x"] * width) + "]"]
    lines += [f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _own_polygons_over_the_demo(ctx: Ctx) -> str:
    """The demo unset, its CORINE as polygons of one's own (CLC codes in column LC) with a mapping to level 1."""
    from lcflow.labels import nomenclature

    mapping = ctx.tmp / "level1.csv"
    level1 = nomenclature.clc_level(1)
    mapping.write_text("code,class_code,class_name\n" + "".join(
        f"{code},{cls},{level1.names[cls]}\n" for code, cls in sorted(level1.mapping.items())))
    return yaml.safe_dump({"demo": None, "stac": {"catalog": str(ctx.demo / "catalog" / "catalog.json")},
                           "labels": {"corine": None, "reference": _demo_polygons(ctx, "LC"), "code_column": "LC",
                                      "mapping": str(mapping)}, "assess": {"truth": None}})


LAYERED_CASES = [
    layered_case("a key given twice", lambda x: "years: [2018]\nyears: [2019]\n",
                 "config file {tmp}/over.yaml: key 'years' is given twice (again on line 2)"),
    layered_case("a template that runs code", lambda x: "__use_yte__: true\nyears: [2018]\n",
                 "config file {tmp}/over.yaml sets __use_yte__, which makes Snakemake run the code in it"),
    layered_case("an alias bomb under an unknown key", lambda x: _alias_bomb(), "config: unknown key 'bomb' in (top level)"),
    layered_case("an aoi unset for a tile left out", lambda x: "tiles: [31UFT]\naoi: {32ULC: null}\n", code=0),
    layered_case("the demo unset, own polygons in place of CORINE", _own_polygons_over_the_demo, code=0),
]


# --------------------------------------------------------------------------------------------- commands


def _manifest(ctx: Ctx, edit: Callable[[list[dict], Ctx], None]) -> Path:
    items = json.loads(ctx.stages["items2018"].read_text())
    edit(items["features"], ctx)
    path = ctx.tmp / "items.json"
    path.write_text(json.dumps(items))
    return path


def _cube(ctx: Ctx, manifest: Path, *extra) -> tuple[int, list[str]]:
    return ctx.lcflow("cube", "--items", manifest, "--tile", "31UFT", "--year", 2018, "--bands", "B04,B08",
                      "--bounds", ",".join(map(str, SMALL)), "--out", ctx.out / "cube.tif", "--valid",
                      ctx.out / "valid.tif", *extra)


def _stage(ctx: Ctx, manifest: Path, folder: Path, mode: str = "fetch") -> tuple[int, list[str]]:
    """``lcflow stage`` of 31UFT 2018's bands B04 and B08 into ``folder``; local assets copied (``fetch``)."""
    return ctx.lcflow("stage", "--items", manifest, "--tile", "31UFT", "--year", 2018, "--bands", "B04,B08",
                      "--dir", folder, "--mode", mode, "--out", ctx.out / "staged.json")


def _users_scenes(ctx: Ctx, folder: Path) -> None:
    """The demo's first scene of 31UFT 2018 copied by hand to where the stage-in would put it."""
    item = json.loads(ctx.stages["items2018"].read_text())["features"][0]
    own = folder / "31UFT" / "2018" / item["id"]
    own.mkdir(parents=True)
    shutil.copy(item["assets"]["red"]["href"], own / "red.tif")


def _sample(ctx: Ctx, *extra, year: int = 2018) -> tuple[int, list[str]]:
    """lcflow sample of the demo's 31UFT ``year`` from its 2018 cube and the tile's labels, with ``extra``."""
    return ctx.lcflow("sample", "--cube", ctx.stages["cube2018"], "--valid", ctx.stages["valid2018"], "--labels",
                      ctx.stages["labels"], "--tile", "31UFT", "--year", year, *extra, "--out", ctx.out / "s.parquet")


def _truncate_red(items: list[dict], ctx: Ctx) -> None:
    asset = items[3]["assets"]["red"]
    data = Path(asset["href"]).read_bytes()
    (ctx.tmp / "red.tif").write_bytes(data[: len(data) // 2])
    asset["href"] = str(ctx.tmp / "red.tif")


def _red_rewritten(ctx: Ctx, items: list[dict], rewrite: Callable[[np.ndarray], np.ndarray]) -> None:
    """The fourth item's red asset replaced by a GeoTIFF of ``rewrite(its bands)`` on the same origin."""
    asset = items[3]["assets"]["red"]
    with rasterio.open(asset["href"]) as ds:
        profile, data = {**ds.profile, "driver": "GTiff"}, ds.read()
    data = rewrite(data)
    path = ctx.tmp / "red.tif"
    with rasterio.open(path, "w", **{**profile, "count": data.shape[0], "height": data.shape[1],
                                     "width": data.shape[2]}) as dst:
        dst.write(data)
    asset["href"] = str(path)


def _all_cloud(items: list[dict], ctx: Ctx) -> None:
    with rasterio.open(items[0]["assets"]["scl"]["href"]) as ds:
        profile = {**ds.profile, "driver": "GTiff"}
        cloud = np.full((1, ds.height, ds.width), 9, dtype=ds.dtypes[0])
    path = ctx.tmp / "scl_cloud.tif"
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(cloud)
    for item in items:
        item["assets"]["scl"]["href"] = str(path)


def _table(ctx: Ctx, edit: Callable[[pd.DataFrame], pd.DataFrame] = lambda d: d, name: str = "t.parquet") -> Path:
    """The small demo's 2018 samples, edited."""
    frame = edit(pd.read_parquet(ctx.stages["samples2018"]))
    path = ctx.tmp / name
    frame.to_parquet(path)
    return path


def _dated(ctx: Ctx, edit: Callable[[list], object]) -> Path:
    """The small demo's 2018 samples with their dates (metadata ``time_steps``) edited."""
    table = samples.read(ctx.stages["samples2018"])
    path = ctx.tmp / "t.parquet"
    samples.write(table.frame, path, {**table.meta, "time_steps": edit(list(table.meta["time_steps"]))})
    return path


def _train(ctx: Ctx, table: Path, *extra, model: str = "rf") -> tuple[int, list[str]]:
    fast = ["--set", "n_estimators=10"] if model == "rf" else ["--set", "epochs=1", "--set", "min_steps=0",
                                                               "--set", "hidden_size=8"]
    return ctx.lcflow("train", "--model", model, "--samples", table, "--out", ctx.out / model, *fast, *extra)


def _trained_rf(ctx: Ctx, name: str = "model") -> Path:
    from lcflow.train import training

    model = ctx.tmp / name
    training.train("rf", [str(ctx.stages["samples2018"])], model, {"n_estimators": 10})
    return model


def _planted_checkpoint(ctx: Ctx) -> tuple[int, list[str]]:
    """A checkpoint that runs code when unpickled; training must not run it (and still succeed)."""
    marker = ctx.tmp / "PWNED"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    (ctx.out / "lstm").mkdir(parents=True)
    (ctx.out / "lstm" / "checkpoint.pt").write_bytes(pickle.dumps({"fingerprint": Exploit()}))
    result = _train(ctx, ctx.stages["samples2018"], model="lstm")
    assert not marker.exists(), "the planted checkpoint ran code"
    return result


def _swapped_weights(ctx: Ctx) -> tuple[int, list[str]]:
    model = _trained_rf(ctx)
    other = ctx.tmp / "other"
    from lcflow.train import training

    training.train("rf", [str(ctx.stages["samples2018"])], other, {"n_estimators": 11})
    shutil.copy(other / "model.skops", model / "model.skops")
    return ctx.lcflow("evaluate", "--model-dir", model, "--samples", ctx.stages["samples2018"], "--out", ctx.out / "m.json")


def _weights_named(ctx: Ctx, name: str) -> tuple[int, list[str]]:
    """A model.json that names ``name`` as its weights file (its checksum the real weights')."""
    model = _trained_rf(ctx)
    meta = json.loads((model / "model.json").read_text())
    meta["weights"]["file"] = name
    (model / "model.json").write_text(json.dumps(meta))
    (ctx.tmp / "outside.skops").write_bytes((model / "model.skops").read_bytes())
    return ctx.lcflow("evaluate", "--model-dir", model, "--samples", ctx.stages["samples2018"], "--out", ctx.out / "m.json")


def _pickled_network(ctx: Ctx) -> tuple[int, list[str]]:
    """A deep model whose weights file is a pickled object (its checksum recorded): torch refuses it with
    weights_only, and its message would advise loading it with weights_only=False."""
    import hashlib

    import torch

    from lcflow.train import training

    model = ctx.tmp / "lstm"
    training.train("lstm", [str(ctx.stages["samples2018"])], model, {"epochs": 1, "hidden_size": 8, "num_layers": 1})
    torch.save({"net": Ctx}, model / "model.pt")  # an object of a class: a pickle, not a state dict of tensors
    meta = json.loads((model / "model.json").read_text())
    meta["weights"]["sha256"] = hashlib.sha256((model / "model.pt").read_bytes()).hexdigest()
    (model / "model.json").write_text(json.dumps(meta))
    return ctx.lcflow("evaluate", "--model-dir", model, "--samples", ctx.stages["samples2018"], "--out", ctx.out / "m.json")


def _not_a_cube(ctx: Ctx) -> tuple[int, list[str]]:
    return ctx.lcflow("predict", "--model-dir", _trained_rf(ctx), "--cube", ctx.stages["labels"],
                      "--out", ctx.out / "map.tif", "--confidence", ctx.out / "conf.tif")


def _cyclic_catalogue(ctx: Ctx) -> tuple[int, list[str]]:
    """The small demo's catalogue with a tile-year's child catalogue linking back to the root as a child."""
    root = ctx.tmp / "catalog"
    shutil.copytree(ctx.demo / "catalog", root)
    child = root / "31UFT_2018" / "catalog.json"
    data = json.loads(child.read_text())
    data["links"].append({"rel": "child", "href": "../catalog.json", "type": "application/json"})
    child.write_text(json.dumps(data))
    return ctx.lcflow("search", "--tile", "31UFT", "--year", 2018, "--catalog", root / "catalog.json", "--out",
                      ctx.out / "items.json")


def _behind_a_password(ctx: Ctx, command: str) -> tuple[int, list[str]]:
    """The small demo's catalogue (search) or one of its scenes (cube) on a server that answers 401 to a
    request without credentials."""
    from ..http_server import serve

    with serve(ctx.demo / "catalog") as server:
        server.password = "Basic " + base64.b64encode(b"ann:pw").decode()
        ctx.server = server.url
        if command == "search":
            return ctx.lcflow("search", "--tile", "31UFT", "--year", 2018, "--catalog", f"{server.url}/catalog.json",
                              "--out", ctx.out / "items.json")

        def remote_red(items: list[dict], c: Ctx) -> None:
            href = items[3]["assets"]["red"]["href"]
            items[3]["assets"]["red"]["href"] = f"{server.url}/{Path(href).relative_to(c.demo / 'catalog')}"

        return _cube(ctx, _manifest(ctx, remote_red))


COMMAND_CASES = [
    Case("search: a catalogue that asks for credentials", lambda x: _behind_a_password(x, "search"),
         "answers HTTP 401 Unauthorized; it wants credentials, which lcflow sends to the catalogue's host: give "
         "them as GDAL_HTTP_USERPWD"),
    Case("cube: a scene that asks for credentials", lambda x: _behind_a_password(x, "cube"),
         "failed: HTTP response code: 401; the server wants credentials: give them for its host in ~/.netrc"),
    Case("search: a catalogue whose links run in a cycle", _cyclic_catalogue,
         "STAC catalog {tmp}/catalog/catalog.json: its links run in a cycle ({tmp}/catalog/catalog.json is reached "
         "again"),
    Case("search: catalog that is not JSON",
         lambda x: ((x.tmp / "c.json").write_text("not json"),
                    x.lcflow("search", "--tile", "31UFT", "--year", 2018, "--catalog", x.tmp / "c.json",
                             "--out", x.out / "items.json"))[1],
         "lcflow search: error: STAC catalog {tmp}/c.json (or a file it links) is not JSON"),
    Case("search: missing catalog",
         lambda x: x.lcflow("search", "--tile", "31UFT", "--year", 2018, "--catalog", x.tmp / "none.json",
                            "--out", x.out / "items.json"),
         "STAC catalog {tmp}/none.json does not exist"),
    Case("search: no scene that year",
         lambda x: x.lcflow("search", "--tile", "31UFT", "--year", 2021, "--catalog", x.demo / "catalog" / "catalog.json",
                            "--out", x.out / "items.json"),
         "no Sentinel-2 item for tile 31UFT in 2021"),
    Case("search: malformed tile",
         lambda x: x.lcflow("search", "--tile", "31UF", "--year", 2018, "--catalog", x.demo / "catalog" / "catalog.json",
                            "--out", x.out / "items.json"),
         "tile '31UF' is not an MGRS tile id"),
    Case("cube: empty manifest file", lambda x: ((x.tmp / "m.json").write_text(""), _cube(x, x.tmp / "m.json"))[1],
         "manifest {tmp}/m.json is not JSON"),
    Case("cube: manifest without items",
         lambda x: ((x.tmp / "m.json").write_text('{"type": "FeatureCollection", "features": []}'),
                    _cube(x, x.tmp / "m.json"))[1],
         "manifest {tmp}/m.json lists no items"),
    Case("cube: a catalog given as manifest",
         lambda x: _cube(x, x.demo / "catalog" / "catalog.json"), "catalog.json is not a STAC ItemCollection (a GeoJSON FeatureCollection"),
    Case("cube: zero time steps", lambda x: _cube(x, x.stages["items2018"], "--time-steps", 0),
         "lcflow cube: error: argument --time-steps: 0 is outside [1, "),
    Case("cube: zero block", lambda x: _cube(x, x.stages["items2018"], "--block-px", 0),
         "argument --block-px: 0 is outside [16, 4096] (cube.block_px)"),
    Case("stage: settings of a config that reads remotely", lambda x: x.lcflow(
        "stage", "--items", x.stages["items2018"], "--tile", "31UFT", "--year", 2018, "--out", x.out / "staged.json",
        "--settings", json.dumps({"mode": "remote", "dir": str(x.out / "scenes")})),
        "lcflow stage: error: stage.mode is remote: nothing is staged"),
    Case("stage: settings with a key misspelt", lambda x: x.lcflow(
        "stage", "--items", x.stages["items2018"], "--tile", "31UFT", "--year", 2018, "--out", x.out / "staged.json",
        "--settings", '{"connection": 8}'),
        "lcflow stage: error: unknown key 'connection' in stage"),
    Case("stage: a folder that holds the user's own scenes laid out as staged ones",
         lambda x: _stage(x, x.stages["items2018"], x.out / "scenes"),
         "is there already, and lcflow stage did not write it (it is not in", state="unchanged",
         setup=lambda x: _users_scenes(x, x.out / "scenes")),
    Case("stage: a stage.dir around the catalogue's own files",
         lambda x: _stage(x, x.stages["items2018"], x.demo, mode="auto"),
         "holds the catalogue's own files (its catalogue: "),
    Case("stage: a file:size that is no number of bytes",
         lambda x: _stage(x, _manifest(x, lambda f, c: f[0]["assets"]["red"].update({"file:size": float("nan")})),
                          x.out / "scenes"),
         "asset red: its file:size nan is not a number of bytes"),
    Case("stage: a stage.dir that links to nothing",
         lambda x: ((x.tmp / "scenes").symlink_to(x.tmp / "gone"), _stage(x, x.stages["items2018"], x.tmp / "scenes"))[1],
         "is a link to {tmp}/gone, which does not exist"),
    Case("stage: an item listed twice",
         lambda x: _stage(x, _manifest(x, lambda f, c: f.append(f[0])), x.out / "scenes"),
         "asset red would be staged to one file ("),
    Case("cube: settings with a value out of bounds",
         lambda x: _cube(x, x.stages["items2018"], "--settings", '{"dilation_px": 60}'),
         "lcflow cube: error: cube.dilation_px = 60 is outside [0, 50]"),
    Case("cube: settings with a key misspelt",
         lambda x: _cube(x, x.stages["items2018"], "--settings", '{"dilaton_px": 2}'),
         "lcflow cube: error: unknown key 'dilaton_px' in cube"),
    Case("cube: zero resolution", lambda x: _cube(x, x.stages["items2018"], "--resolution", 0),
         "argument --resolution: 0 is outside [1, 1000] (cube.resolution)"),
    Case("cube: three-value bounds",
         lambda x: x.lcflow("cube", "--items", x.stages["items2018"], "--tile", "31UFT", "--year", 2018,
                            "--bounds", "640000,5760000,640320", "--out", x.out / "c.tif", "--valid", x.out / "v.tif"),
         "argument --bounds: '640000,5760000,640320': expected four numbers xmin,ymin,xmax,ymax, got 3"),
    Case("cube: bounds outside the tile",
         lambda x: x.lcflow("cube", "--items", x.stages["items2018"], "--tile", "31UFT", "--year", 2018,
                            "--bounds", "800000,5760000,800320,5760320", "--out", x.out / "c.tif", "--valid", x.out / "v.tif"),
         "area [800000.0, 5760000.0, 800320.0, 5760320.0] is not inside tile 31UFT"),
    Case("cube: a band given twice", lambda x: _cube(x, x.stages["items2018"], "--bands", "B04,B08,B04"),
         "band(s) B04 given more than once in B04, B08, B04: name each once"),
    Case("cube: unknown band", lambda x: _cube(x, x.stages["items2018"], "--bands", "B04,B13"),
         "unknown Sentinel-2 band(s) ['B13']"),
    Case("cube: an asset of three bands", lambda x: _cube(x, _manifest(x, lambda i, c: _red_rewritten(
        c, i, lambda d: np.concatenate([d, d, d])))),
         "asset red holds 3 bands, where an asset of one band (B04) was expected: a multi-band asset is read by"),
    Case("cube: truncated COG", lambda x: _cube(x, _manifest(x, _truncate_red)),
         "tile 31UFT 2018: reading item S2"),
    Case("cube: truncated COG names the asset", lambda x: _cube(x, _manifest(x, _truncate_red)),
         "asset red ({tmp}/red.tif) failed: TIFFFillTile"),
    Case("cube: an asset href pointing at /etc/passwd",
         lambda x: _cube(x, _manifest(x, lambda items, c: items[1]["assets"]["red"].update(href="/etc/passwd"))),
         "asset red (/etc/passwd) failed: '/etc/passwd' not recognized as being in a supported file format"),
    Case("cube: a truncated COG leaves the earlier cube as it was", lambda x: _cube(x, _manifest(x, _truncate_red)),
         "asset red ({tmp}/red.tif) failed: TIFFFillTile", state="unchanged",
         setup=lambda x: _cube(x, x.stages["items2018"])),
    Case("cube: a later item lacks a band",
         lambda x: _cube(x, _manifest(x, lambda items, c: items[5]["assets"].pop("nir"))),
         "item S2B_31UFT_20180612_0_L2A has no 'nir' asset (band B08, as in S2A_31UFT_20180118_0_L2A)"),
    Case("cube: a later item in another CRS",
         lambda x: _cube(x, _manifest(x, lambda items, c: items[4]["properties"].update({"proj:code": "EPSG:32632"}))),
         "is in EPSG:32632, the tile's zone is EPSG:32631"),
    Case("cube: a year of cloud only", lambda x: _cube(x, _manifest(x, _all_cloud)),
         "tile 31UFT 2018: only 0.0 % of the composite cells (pixel x time step, of the 10 of 12 steps that hold an "
         "item) hold a clear observation, under the floor of 10 % (cube.min_clear_fraction lowers it)"),
    Case("cube: tile of another zone", lambda x: x.lcflow(
        "cube", "--items", x.stages["items2018"], "--tile", "32ULC", "--year", 2018, "--out", x.out / "c.tif",
        "--valid", x.out / "v.tif"), "is in EPSG:32631, the tile's zone is EPSG:32632"),
    Case("labels: missing CORINE", lambda x: x.lcflow(
        "labels", "--corine", x.tmp / "none.tif", "--grid", x.stages["cube2018"], "--out", x.out / "l.tif"),
        "CORINE raster {tmp}/none.tif does not exist"),
    Case("labels: CORINE that is no raster", lambda x: ((x.tmp / "c.tif").write_text("x"), x.lcflow(
        "labels", "--corine", x.tmp / "c.tif", "--grid", x.stages["cube2018"], "--out", x.out / "l.tif"))[1],
        "CORINE raster {tmp}/c.tif cannot be read as a raster"),
    Case("labels: reference data without a mapping", lambda x: x.lcflow(
        "labels", "--reference", _demo_polygons(x, "LC"), "--code-column", "LC", "--grid", x.stages["cube2018"],
        "--out", x.out / "l.tif"), "--reference needs --mapping: the nomenclature file"),
    Case("labels: reference data without its code column", lambda x: (
        (x.tmp / "m.csv").write_text("code,class_code,class_name\n211,1,arable\n"), x.lcflow(
            "labels", "--reference", _demo_polygons(x, "LC"), "--code-column", "crop", "--mapping", x.tmp / "m.csv",
            "--grid", x.stages["cube2018"], "--out", x.out / "l.tif"))[1],
        "{tmp}/clc.gpkg has no column 'crop' (columns: LC)"),
    Case("labels: a reference polygon whose ring crosses itself", lambda x: x.lcflow(
        "labels", "--reference", _bow_tie(x), "--code-column", "code", "--mapping", x.tmp / "m.csv",
        "--grid", x.stages["cube2018"], "--out", x.out / "l.tif"),
        "{tmp}/bow.gpkg: 1 polygon(s) in the area of the tile are not valid geometries, the first feature 1: "
        "Self-intersection["),
    Case("labels: CORINE covering half the tile", lambda x: x.lcflow(
        "labels", "--corine", corine_half(x), "--grid", x.stages["cube2018"], "--unlabelled-max", 0.3, "--out",
        x.out / "l.tif"), "{tmp}/clc_half.tif gives no class to 56.0 % of the tile area"),
    Case("cube: a manifest of another year", lambda x: x.lcflow(
        "cube", "--items", x.stages["items2018"], "--tile", "31UFT", "--year", 2019, "--bounds", ",".join(map(str, SMALL)),
        "--out", x.out / "c.tif", "--valid", x.out / "v.tif"), "items of the manifest were acquired in 2018, not 2019"),
    Case("evaluate: a table without any observation", lambda x: x.lcflow(
        "evaluate", "--model-dir", _trained_rf(x), "--samples",
        _table(x, lambda d: d.assign(**{c: np.nan for c in d.columns if "_t" in c})), "--out", x.out / "m.json"),
        "none of its 102 rows holds an observation (every band value is missing)"),
    Case("evaluate: none of the model's classes", lambda x: x.lcflow(
        "evaluate", "--model-dir", _trained_rf(x), "--samples", _table(x, lambda d: d.assign(label=d["label"] + 900)),
        "--out", x.out / "m.json"), "is a class of the model (11, 21, 23, 31, 51): score it with a model trained"),
    Case("labels: points and polygons in one file", lambda x: x.lcflow(
        "labels", "--corine", _mixed_geometries(x), "--code-column", "LC", "--grid", x.stages["cube2018"],
        "--out", x.out / "l.tif"), "{tmp}/mixed.gpkg mixes points and polygons in the area of the tile: give them as two files"),
    Case("design-sample: a class guess that is no number", lambda x: x.lcflow(
        "design-sample", "--map", x.stages["labels"], "--out", x.out / "d.gpkg", "--class-users-accuracy", "21=high"),
        "--class-users-accuracy '21=high': expected CODE=U, e.g. 512=0.95"),
    Case("design-sample: a class guess over 1", lambda x: x.lcflow(
        "design-sample", "--map", x.stages["labels"], "--out", x.out / "d.gpkg", "--class-users-accuracy", "21=1.5"),
        "design user's accuracy guess for 21 = 1.5: expected within 0..1"),
    Case("assess: reference file without its column", lambda x: (
        (x.tmp / "r.csv").write_text("lon,lat,ref\n4.5,52.0,21\n"), x.lcflow(
            "assess", "--model-dir", _trained_rf(x), "--samples", x.stages["samples2018"], "--map", x.stages["labels"],
            "--reference", x.tmp / "r.csv", "--out", x.out / "a.json"))[1],
        "reference file {tmp}/r.csv has no column 'reference' (columns: lon, lat, ref)"),
    Case("labels: CORINE code 99", lambda x: x.lcflow(
        "labels", "--corine", _corine_copy(x, 99), "--grid", x.stages["cube2018"], "--out", x.out / "l.tif"),
        "value(s) 99 of the CORINE raster are not CORINE codes"),
    Case("sample: fractions not summing to 1",
         lambda x: _sample(x, "--fractions", '{"train": 0.7, "val": 0.2, "test": 0.2}'),
         "sample fractions {'train': 0.7, 'val': 0.2, 'test': 0.2} sum to 1.1, not 1"),
    Case("sample: reference cube with other bands", lambda x: _sample(x, "--reference-cube", x.stages["labels"], year=2019),
        "labels.tif has other bands or steps than the cube of tile 31UFT 2019"),
    Case("sample: cleaning threshold over 1", lambda x: _sample(x, "--clean-min-label-probability", "1.5"),
        "argument --clean-min-label-probability: 1.5 is outside [0, 1]"),
    Case("sample: settings with a nested value out of bounds", lambda x: _sample(x, "--settings", '{"clean": {"folds": 1}}'),
        "lcflow sample: error: sample.clean.folds = 1 is outside [2, 50]"),
    Case("sample: settings with a nested key misspelt", lambda x: _sample(x, "--settings", '{"transfer": {"mad": 2}}'),
        "lcflow sample: error: unknown key 'mad' in sample.transfer"),
    Case("sample: fractions not JSON", lambda x: _sample(x, "--fractions", "train=0.6"),
        "argument --fractions: 'train=0.6' is not JSON"),
    Case("train: a bad table leaves the earlier model as it was",
         lambda x: _train(x, _table(x, lambda d: d.assign(B04_t01=d["B04_t01"].where(d.index != 3, np.inf)))),
         "1 infinite value(s) in band column(s) B04_t01", state="unchanged",
         setup=lambda x: _train(x, x.stages["samples2018"])),
    Case("train: infinite band value",
         lambda x: _train(x, _table(x, lambda d: d.assign(B04_t01=d["B04_t01"].where(d.index != 3, np.inf)))),
         "lcflow train: error: {tmp}/t.parquet: 1 infinite value(s) in band column(s) B04_t01"),
    Case("train: a band value of 1e30",
         lambda x: _train(x, _table(x, lambda d: d.assign(B04_t01=d["B04_t01"].where(d.index != 3, 1e30)))),
         "lcflow train: error: {tmp}/t.parquet: 1 value(s) beyond +-1e+06 (1e+30 in B04_t01, row 3): no reflectance"),
    Case("train: a table given twice", lambda x: x.lcflow(
        "train", "--model", "rf", "--samples", x.stages["samples2018"], x.stages["samples2018"], "--out", x.out / "rf"),
         "/31UFT/2018/samples.parquet is given twice: its rows would count double"),
    Case("train: a table of 12 steps and one of 6", lambda x: x.lcflow(
        "train", "--model", "rf", "--samples", x.stages["samples2018"],
        _table(x, lambda d: d.drop(columns=[c for c in d.columns if re.search(r"_t(0[6-9]|1\d)$", c)]), "six.parquet"),
        "--out", x.out / "rf"),
         "/31UFT/2018/samples.parquet has 12 time steps of B02, B03"),
    Case("train: text in a band column",
         lambda x: _train(x, _table(x, lambda d: d.assign(B04_t00=d["B04_t00"].astype(str)))),
         "band column(s) B04_t00 are not numeric"),
    Case("train: every row without observation",
         lambda x: _train(x, _table(x, lambda d: d.assign(**{c: np.nan for c in d.columns if "_t" in c}))),
         "no 'train' rows with an observation"),
    Case("train: zero epochs", lambda x: _train(x, x.stages["samples2018"], "--set", "epochs=0", model="lstm"),
         "--set.epochs = 0: expected an integer in [1, 10000]"),
    Case("train: trees not a number", lambda x: _train(x, x.stages["samples2018"], "--set", "n_estimators=abc"),
         "--set.n_estimators = 'abc': expected an integer in [1, 10000]"),
    Case("train: zero batch size", lambda x: _train(x, x.stages["samples2018"], "--set", "batch_size=0", model="lstm"),
         "--set.batch_size = 0: expected an integer in [1, 65536]"),
    Case("train: unknown optimizer", lambda x: _train(x, x.stages["samples2018"], "--set", "optimizer=foo", model="lstm"),
         "--set.optimizer = 'foo': expected one of adamw, sgd, lamb"),
    Case("train: unknown parameter", lambda x: _train(x, x.stages["samples2018"], "--set", "trees=5"),
         "unknown parameter 'trees' for model rf"),
    Case("train: parameter without value", lambda x: _train(x, x.stages["samples2018"], "--set", "epochs", model="lstm"),
         "--set 'epochs': expected key=value"),
    Case("train: --params not JSON", lambda x: _train(x, x.stages["samples2018"], "--params", "{epochs: 3"),
         "--params '{epochs: 3': not a JSON object"),
    Case("train: unknown model", lambda x: _train(x, x.stages["samples2018"], model="svm"),
         "argument --model: invalid choice: 'svm'"),
    Case("train: no label column", lambda x: _train(x, _table(x, lambda d: d.drop(columns=["label"]))),
         "{tmp}/t.parquet: no 'label' column"),
    Case("train: a single class", lambda x: _train(x, _table(x, lambda d: d.assign(label=21))),
         "{tmp}/t.parquet: only 1 class (21); at least 2 needed"),
    Case("train: missing band column", lambda x: _train(x, _table(x, lambda d: d.drop(columns=["B04_t03"]))),
         "missing band column(s) B04_t03"),
    Case("train: fractional labels", lambda x: _train(x, _table(x, lambda d: d.assign(label=d["label"] + 0.5))),
         "'label' must be integer class codes"),
    Case("train: negative labels", lambda x: _train(x, _table(x, lambda d: d.assign(label=-d["label"]))),
         "label value(s) [-51, -31, -23, -21, -11] are not class codes 0..65534"),
    Case("train: unknown split", lambda x: _train(x, _table(x, lambda d: d.assign(split="training"))),
         "unknown split value(s) ['training']"),
    Case("train: dates that go back in time",
         lambda x: _train(x, _dated(x, lambda d: d[:5] + [d[6], d[5]] + d[7:])),
         "{tmp}/t.parquet: metadata 'time_steps' goes back in time at step 6 (2018-07-"),
    Case("train: a date missing", lambda x: _train(x, _dated(x, lambda d: d[1:])),
         "{tmp}/t.parquet: metadata 'time_steps' holds 11 entries; a list of 12 ISO dates"),
    Case("train: not a date", lambda x: _train(x, _dated(x, lambda d: [*d[:3], "April", *d[4:]])),
         "{tmp}/t.parquet: metadata 'time_steps'[3] = 'April' is not an ISO date (YYYY-MM-DD)"),
    Case("train: not parquet", lambda x: ((x.tmp / "t.parquet").write_text("x"), _train(x, x.tmp / "t.parquet"))[1],
         "samples table {tmp}/t.parquet is not a readable parquet file"),
    Case("train: missing table", lambda x: _train(x, x.tmp / "none.parquet"), "samples table {tmp}/none.parquet does not exist"),
    Case("train: resnet without patches", lambda x: x.lcflow("train", "--model", "resnet", "--samples",
                                                             x.stages["samples2018"], "--out", x.out / "resnet"),
         "model resnet trains on patches"),
    Case("train: a planted checkpoint runs no code", _planted_checkpoint, "", state="ok", code=0),
    Case("tune: no trials", lambda x: x.lcflow("tune", "--model", "rf", "--samples", x.stages["samples2018"],
                                              "--study", x.out / "study", "--trials", 0),
         "argument --trials: 0 is outside [1, 100000] (hpo.trials)"),
    Case("tune: a space file with another model's parameter",
         lambda x: ((x.tmp / "space.yaml").write_text("n_estimators: {low: 10, high: 50}\n"),
                    x.lcflow("tune", "--model", "lstm", "--samples", x.stages["samples2018"], "--study",
                             x.out / "study", "--trials", 2, "--space", x.tmp / "space.yaml"))[1],
         "--space.n_estimators: unknown parameter 'n_estimators' for model lstm"),
    Case("tune: a space that is not a mapping", lambda x: x.lcflow(
        "tune", "--model", "rf", "--samples", x.stages["samples2018"], "--study", x.out / "study", "--trials", 2,
        "--space-json", '{"n_estimators": [10, 50]}'),
         "--space.n_estimators = [10, 50]: expected {low: .., high: ..} or {choices: [..]}"),
    Case("tune: settings whose space holds another model's parameter", lambda x: x.lcflow(
        "tune", "--model", "lstm", "--samples", x.stages["samples2018"], "--study", x.out / "study", "--settings",
        json.dumps({"trials": 2, "space": {"lstm": {"n_estimators": {"low": 10, "high": 50}}}})),
         "hpo.space.lstm.n_estimators: unknown parameter 'n_estimators' for model lstm"),
    Case("tune: settings with a key misspelt", lambda x: x.lcflow(
        "tune", "--model", "rf", "--samples", x.stages["samples2018"], "--study", x.out / "study", "--settings",
        '{"trails": 2}'), "lcflow tune: error: unknown key 'trails' in hpo"),
    Case("tune-summary: a directory without a study", lambda x: x.lcflow(
        "tune-summary", "--study", x.tmp, "--out", x.out / "best.yaml"), "no journal.log (run lcflow tune on it first)"),
    Case("train: tuned parameters of another model",
         lambda x: ((x.tmp / "best.yaml").write_text("model: rf\nparams: {n_estimators: 20}\n"),
                    _train(x, x.stages["samples2018"], "--tuned", x.tmp / "best.yaml", model="lstm"))[1],
         "tuned parameters {tmp}/best.yaml are of model rf, not lstm"),
    Case("train: tuned parameters out of range",
         lambda x: ((x.tmp / "best.yaml").write_text("model: rf\nparams: {n_estimators: 0}\n"),
                    _train(x, x.stages["samples2018"], "--tuned", x.tmp / "best.yaml"))[1],
         "{tmp}/best.yaml.n_estimators = 0: expected an integer in [1, 10000]"),
    Case("blend: two forests", lambda x: x.lcflow(
        "blend", "--members", _trained_rf(x), _trained_rf(x, "other"), "--samples", x.stages["samples2018"],
        "--out", x.out / "blend"), "{tmp}/model and {tmp}/other are both rf models"),
    Case("evaluate: a single-class table", lambda x: x.lcflow(
        "evaluate", "--model-dir", _trained_rf(x), "--samples", _table(x, lambda d: d.assign(label=21)),
        "--out", x.out / "m.json"), "{tmp}/t.parquet: only 1 class (21); at least 2 needed"),
    Case("evaluate: not a model directory", lambda x: ((x.tmp / "empty").mkdir(), x.lcflow(
        "evaluate", "--model-dir", x.tmp / "empty", "--samples", x.stages["samples2018"], "--out", x.out / "m.json"))[1],
        "{tmp}/empty is not a trained model directory (no model.json)"),
    Case("evaluate: weights of another model", _swapped_weights,
         "model.skops is not the weights model.json was written with"),
    Case("evaluate: weights that are a device", lambda x: _weights_named(x, "/dev/zero"),
         "{tmp}/model/model.json: weights file '/dev/zero' is not the name of a file in the model directory"),
    Case("evaluate: weights outside the model directory", lambda x: _weights_named(x, "../outside.skops"),
         "{tmp}/model/model.json: weights file '../outside.skops' is not the name of a file in the model directory"),
    Case("evaluate: weights that are pickled objects", _pickled_network,
         "model.pt: not the weights lcflow train writes (a state dict of tensors): it holds pickled objects"),
    Case("predict: map and confidence the same file", lambda x: x.lcflow(
        "predict", "--model-dir", _trained_rf(x), "--cube", x.stages["cube2018"], "--out", x.out / "m.tif",
        "--confidence", x.out / "m.tif"), "--out and --confidence name the same file {tmp}/out/m.tif"),
    Case("predict: a raster that is no cube", _not_a_cube, "labels.tif is not a cube written by lcflow cube"),
    Case("predict: a raster that is no cube leaves the earlier map as it was", _not_a_cube,
         "labels.tif is not a cube written by lcflow cube", state="unchanged",
         setup=lambda x: x.lcflow("predict", "--model-dir", _trained_rf(x), "--cube", x.stages["cube2018"],
                                  "--out", x.out / "map.tif", "--confidence", x.out / "conf.tif")),
    Case("predict: missing model", lambda x: x.lcflow(
        "predict", "--model-dir", x.tmp / "none", "--cube", x.stages["cube2018"], "--out", x.out / "m.tif",
        "--confidence", x.out / "c.tif"), "is not a trained model directory"),
    Case("consistent-maps: years and probability rasters differ in number", lambda x: x.lcflow(
        "consistent-maps", "--probabilities", x.out / "a.tif", x.out / "b.tif", "--years", 2018, "--out",
        x.out / "m.tif", "--confidence", x.out / "c.tif", "--summary", x.out / "s.json"),
        "--years names 1 years for 2 --probabilities"),
    Case("consistent-maps: one probability raster given for two years", lambda x: x.lcflow(
        "consistent-maps", "--probabilities", x.tmp / "p2018.tif", x.tmp / "p2018.tif", "--years", 2018, 2019,
        "--out", x.out / "m18.tif", x.out / "m19.tif", "--confidence", x.out / "c18.tif", x.out / "c19.tif",
        "--changes", x.out / "ch.tif", "--summary", x.out / "s.json"),
        "probability raster {tmp}/p2018.tif (2019) is {tmp}/p2018.tif (2018) or a copy of it: each year needs"),
    Case("consistent-maps: a year not predicted", lambda x: x.lcflow(
        "consistent-maps", "--probabilities", x.tmp / "p2018.tif", x.tmp / "p2019.tif", "--years", 2018, 2019,
        "--out", x.out / "m18.tif", x.out / "m19.tif", "--confidence", x.out / "c18.tif", x.out / "c19.tif",
        "--changes", x.out / "ch.tif", "--summary", x.out / "s.json"),
        "probabilities {tmp}/p2018.tif do not exist (lcflow predict --probabilities writes them)"),
    Case("consistent-maps: settings that let any change through", lambda x: x.lcflow(
        "consistent-maps", "--probabilities", x.tmp / "p2018.tif", x.tmp / "p2019.tif", "--years", 2018, 2019,
        "--out", x.out / "m18.tif", x.out / "m19.tif", "--confidence", x.out / "c18.tif", x.out / "c19.tif",
        "--changes", x.out / "ch.tif", "--summary", x.out / "s.json", "--settings", '{"evidence_ratio": 1}'),
        "lcflow consistent-maps: error: consistency.evidence_ratio = 1 is outside (1, 1000000]"),
    Case("stac-item: a class map without its model and scenes", lambda x: x.lcflow(
        "stac-item", "--map", x.out / "m.tif", "--confidence", x.out / "c.tif", "--year", 2018, "--tile", "31UFT",
        "--catalog", x.out / "catalog.json", "--out", x.out / "m.stac.json"),
        "an Item of a class map needs --model-dir --manifest"),
    Case("synth: an area that is not square", lambda x: x.lcflow(
        "synth", "--out", x.out, "--aoi", '{"31UFT": [640000, 5760000, 641280, 5760640]}', "--years", 2018),
        "demo aoi of 31UFT = [640000, 5760000, 641280, 5760640] must be square"),
    Case("synth: an area outside its tile", lambda x: x.lcflow(
        "synth", "--out", x.out, "--aoi", '{"31UFT": [800000, 5760000, 800640, 5760640]}', "--years", 2018),
        "area [800000, 5760000, 800640, 5760640] is not inside tile 31UFT"),
    Case("synth: aoi not JSON", lambda x: x.lcflow("synth", "--out", x.out, "--aoi", "31UFT", "--years", 2018),
         "argument --aoi: '31UFT' is not JSON"),
    Case("assess: truth on another grid", lambda x: x.lcflow(
        "assess", "--model-dir", _trained_rf(x), "--samples", x.stages["samples2018"], "--map", x.stages["labels"],
        "--truth", x.demo / "truth" / "32ULC_2018.tif", "--out", x.out / "a.json"),
        "32ULC_2018.tif is not on the grid of map"),
    Case("assess: missing samples", lambda x: x.lcflow(
        "assess", "--model-dir", _trained_rf(x), "--samples", x.tmp / "none.parquet", "--map", x.stages["labels"],
        "--out", x.out / "a.json"), "samples table {tmp}/none.parquet does not exist"),
    Case("summarize: not an assessment", lambda x: ((x.tmp / "a.json").write_text("[1]"), x.lcflow(
        "summarize", "--assessments", x.tmp / "a.json", "--out", x.out / "acc.tsv"))[1],
        "{tmp}/a.json is not an assessment written by lcflow assess"),
    Case("check-config: a file that is not YAML",
         lambda x: ((x.tmp / "c.yaml").write_text("tiles: [31UFT\n"), x.lcflow("check-config", "--configfile", x.tmp / "c.yaml"))[1],
         "config file {tmp}/c.yaml: line"),
    Case("check-config: the file that set a bad value is named",
         lambda x: ((x.tmp / "over.yaml").write_text("model_params:\n  lstm: {hiden_size: 3}\n"),
                    x.lcflow("check-config", "--configfile", ROOT / "config" / "config.yaml", x.tmp / "over.yaml",
                             "--directory", x.tmp))[1],
         "unknown parameter 'hiden_size' for model lstm; known: epochs, min_steps, batch_size"),
    Case("check-config: ... and which file it is",
         lambda x: ((x.tmp / "over.yaml").write_text("sample:\n  fractions: {train: 0.9, val: 0.2, test: 0.2}\n"),
                    x.lcflow("check-config", "--configfile", ROOT / "config" / "config.yaml", x.tmp / "over.yaml",
                             "--directory", x.tmp))[1],
         "sum to 1.3, not 1 (set in {tmp}/over.yaml)"),
]

# ------------------------------------------------------------------- outputs that are inputs (the guard)


def _own(ctx: Ctx, key: str, name: str | None = None) -> Path:
    """A copy of a stage's product in the case's directory, whose every byte the case guards."""
    dst = ctx.tmp / (name or ctx.stages[key].name)
    shutil.copy(ctx.stages[key], dst)
    return dst


def _own_catalog(ctx: Ctx) -> Path:
    """The demo catalogue's JSON files (catalogue, collection, items) in the case's directory."""
    src = ctx.demo / "catalog"
    for f in src.rglob("*.json"):
        (ctx.tmp / "catalog" / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, ctx.tmp / "catalog" / f.relative_to(src))
    return ctx.tmp / "catalog" / "catalog.json"


def _own_scene(ctx: Ctx) -> None:
    """A manifest whose first item's red band is a file of the case's directory."""
    shutil.copy(json.loads(ctx.stages["items2018"].read_text())["features"][0]["assets"]["red"]["href"],
                ctx.tmp / "red.tif")
    _manifest(ctx, lambda items, c: items[0]["assets"]["red"].update(href=str(c.tmp / "red.tif")))


def _study(ctx: Ctx) -> None:
    (ctx.tmp / "study").mkdir()
    (ctx.tmp / "study" / "journal.log").write_text('{"op_code": 0, "worker_id": "w"}\n')


def _with(*steps: Callable[[Ctx], object]) -> Callable[[Ctx], None]:
    return lambda ctx: [step(ctx) for step in steps] and None


def guard_case(name: str, setup: Callable[[Ctx], object], run: Callable[[Ctx], tuple[int, list[str]]],
               message: str) -> Case:
    """A command whose output would destroy one of its inputs: refused before any work, every file of the
    case's directory byte for byte as before."""
    return Case(f"guard: {name}", run, message, state="unchanged", setup=_with(setup), guards="tmp")


def _samples_and_model(ctx: Ctx) -> None:
    _own(ctx, "samples2018", "s.parquet")
    _trained_rf(ctx)


def _a_child_catalogue(ctx: Ctx) -> None:
    """The small demo's catalogue of 31UFT 2018 where synth-catalog writes its catalogue."""
    (ctx.tmp / "demo" / "catalog").mkdir(parents=True)
    shutil.copy(ctx.demo / "catalog" / "31UFT_2018" / "catalog.json", ctx.tmp / "demo" / "catalog" / "catalog.json")


GUARD_CASES = [
    guard_case("synth-catalog --children names the catalogue it writes", _a_child_catalogue, lambda x: x.lcflow(
        "synth-catalog", "--out", x.tmp / "demo", "--children", x.tmp / "demo" / "catalog" / "catalog.json"),
        "the catalogue {tmp}/demo/catalog/catalog.json is the input --children {tmp}/demo/catalog/catalog.json"),
    guard_case("synth --out is a file", lambda x: (x.tmp / "demo").write_text("mine"), lambda x: x.lcflow(
        "synth", "--out", x.tmp / "demo", "--aoi", '{"31UFT": [640000, 5760000, 640640, 5760640]}', "--years", 2018),
        "--out {tmp}/demo is a file, not a directory"),
    guard_case("evaluate --out is the samples table", _samples_and_model, lambda x: x.lcflow(
        "evaluate", "--model-dir", x.tmp / "model", "--samples", x.tmp / "s.parquet", "--out", x.tmp / "s.parquet"),
        "--out {tmp}/s.parquet is the input --samples {tmp}/s.parquet"),
    guard_case("evaluate --out a symbolic link to the samples table",
               _with(_samples_and_model, lambda x: (x.tmp / "m.json").symlink_to(x.tmp / "s.parquet")),
               lambda x: x.lcflow("evaluate", "--model-dir", x.tmp / "model", "--samples", x.tmp / "s.parquet",
                                  "--out", x.tmp / "m.json"),
               "--out {tmp}/m.json is the input --samples {tmp}/s.parquet"),
    guard_case("evaluate --out the model's metrics", _samples_and_model, lambda x: x.lcflow(
        "evaluate", "--model-dir", x.tmp / "model", "--samples", x.tmp / "s.parquet", "--out",
        x.tmp / "model" / "metrics.json"), "--out {tmp}/model/metrics.json lies inside the input directory --model-dir"),
    guard_case("labels --out a hard link of the grid",
               _with(lambda x: _own(x, "cube2018", "cube.tif"), lambda x: os.link(x.tmp / "cube.tif", x.tmp / "l.tif")),
               lambda x: x.lcflow("labels", "--corine", x.demo / "corine" / "clc_demo_3035.tif", "--grid",
                                  x.tmp / "cube.tif", "--out", x.tmp / "l.tif"),
               "--out {tmp}/l.tif is the input --grid {tmp}/cube.tif"),
    guard_case("search --out is the catalog", _own_catalog, lambda x: x.lcflow(
        "search", "--tile", "31UFT", "--year", 2018, "--catalog", x.tmp / "catalog" / "catalog.json",
        "--out", x.tmp / "catalog" / "catalog.json"), "--out {tmp}/catalog/catalog.json is the input --catalog"),
    guard_case("search --out is an item of the catalog", _own_catalog, lambda x: x.lcflow(
        "search", "--tile", "31UFT", "--year", 2018, "--catalog", x.tmp / "catalog" / "catalog.json", "--out",
        sorted((x.tmp / "catalog").rglob("S2*_31UFT_2018*_L2A.json"))[0]),
        "is the input catalogue file {tmp}/catalog/31UFT_2018/sentinel-2-l2a/S2A_31UFT_20180118_0_L2A/"),
    guard_case("cube --out is the manifest", lambda x: _own(x, "items2018"), lambda x: x.lcflow(
        "cube", "--items", x.tmp / "items.json", "--tile", "31UFT", "--year", 2018, "--out", x.tmp / "items.json",
        "--valid", x.tmp / "v.tif"), "--out {tmp}/items.json is the input --items {tmp}/items.json"),
    guard_case("cube --out and --valid one file", lambda x: _own(x, "items2018"), lambda x: x.lcflow(
        "cube", "--items", x.tmp / "items.json", "--tile", "31UFT", "--year", 2018, "--out", x.tmp / "c.tif",
        "--valid", x.tmp / "c.tif"), "--out and --valid name the same file {tmp}/c.tif"),
    guard_case("cube --out is a scene of the manifest", _own_scene, lambda x: x.lcflow(
        "cube", "--items", x.tmp / "items.json", "--tile", "31UFT", "--year", 2018, "--bands", "B04", "--out",
        x.tmp / "red.tif", "--valid", x.tmp / "v.tif"), "--out {tmp}/red.tif is the input asset red of item"),
    guard_case("predict --out is the cube", _with(lambda x: _own(x, "cube2018"), _trained_rf), lambda x: x.lcflow(
        "predict", "--model-dir", x.tmp / "model", "--cube", x.tmp / "cube.tif", "--out", x.tmp / "cube.tif",
        "--confidence", x.tmp / "c.tif"), "--out {tmp}/cube.tif is the input --cube {tmp}/cube.tif"),
    guard_case("predict --timing is the model's model.json", _with(lambda x: _own(x, "cube2018"), _trained_rf),
               lambda x: x.lcflow("predict", "--model-dir", x.tmp / "model", "--cube", x.tmp / "cube.tif", "--out",
                                  x.tmp / "m.tif", "--confidence", x.tmp / "c.tif", "--timing",
                                  x.tmp / "model" / "model.json"),
               "--timing {tmp}/model/model.json lies inside the input directory --model-dir {tmp}/model"),
    guard_case("predict --confidence is the model's weights", _with(lambda x: _own(x, "cube2018"), _trained_rf),
               lambda x: x.lcflow("predict", "--model-dir", x.tmp / "model", "--cube", x.tmp / "cube.tif", "--out",
                                  x.tmp / "m.tif", "--confidence", x.tmp / "model" / "model.skops"),
               "--confidence {tmp}/model/model.skops lies inside the input directory --model-dir"),
    guard_case("assess --out is the map", _with(lambda x: _own(x, "labels", "map.tif"), _trained_rf), lambda x: x.lcflow(
        "assess", "--model-dir", x.tmp / "model", "--samples", x.stages["samples2018"], "--map", x.tmp / "map.tif",
        "--out", x.tmp / "map.tif"), "--out {tmp}/map.tif is the input --map {tmp}/map.tif"),
    guard_case("assess --figure is the samples table", _samples_and_model, lambda x: x.lcflow(
        "assess", "--model-dir", x.tmp / "model", "--samples", x.tmp / "s.parquet", "--map", x.stages["labels"],
        "--figure", x.tmp / "s.parquet", "--out", x.tmp / "a.json"),
        "--figure {tmp}/s.parquet is the input --samples {tmp}/s.parquet"),
    guard_case("stac-item --out is the map", _with(lambda x: _own(x, "labels", "map.tif"), lambda x: _own(x, "items2018"),
                                                   _trained_rf), lambda x: x.lcflow(
        "stac-item", "--map", x.tmp / "map.tif", "--confidence", x.tmp / "map.tif", "--year", 2018, "--model-dir",
        x.tmp / "model", "--manifest", x.tmp / "items.json", "--tile", "31UFT", "--catalog", x.tmp / "catalog.json",
        "--out", x.tmp / "map.tif"), "--out {tmp}/map.tif is the input --map {tmp}/map.tif"),
    guard_case("stac-item --out is the manifest", _with(lambda x: _own(x, "labels", "map.tif"),
                                                        lambda x: _own(x, "items2018"), _trained_rf), lambda x: x.lcflow(
        "stac-item", "--map", x.tmp / "map.tif", "--confidence", x.tmp / "map.tif", "--year", 2018, "--model-dir",
        x.tmp / "model", "--manifest", x.tmp / "items.json", "--tile", "31UFT", "--catalog", x.tmp / "catalog.json",
        "--out", x.tmp / "items.json"), "--out {tmp}/items.json is the input --manifest {tmp}/items.json"),
    guard_case("stac-catalog --out is an item", lambda x: (x.tmp / "item.json").write_text("{}"), lambda x: x.lcflow(
        "stac-catalog", "--items", x.tmp / "item.json", "--out", x.tmp / "item.json"),
        "--out {tmp}/item.json is the input --items {tmp}/item.json"),
    guard_case("quicklook --out is the map", lambda x: _own(x, "labels", "map.tif"), lambda x: x.lcflow(
        "quicklook", "--map", x.tmp / "map.tif", "--confidence", x.tmp / "map.tif", "--out", x.tmp / "map.tif"),
        "--out {tmp}/map.tif is the input --map {tmp}/map.tif"),
    guard_case("learning-curve --out is the history", lambda x: (x.tmp / "history.csv").write_text("round\n1\n"),
               lambda x: x.lcflow("learning-curve", "--history", x.tmp / "history.csv", "--out", x.tmp / "history.csv"),
               "--out {tmp}/history.csv is the input --history {tmp}/history.csv"),
    guard_case("summarize --out is an assessment", lambda x: (x.tmp / "a.json").write_text("{}"), lambda x: x.lcflow(
        "summarize", "--assessments", x.tmp / "a.json", "--out", x.tmp / "a.json"),
        "--out {tmp}/a.json is the input --assessments {tmp}/a.json"),
    guard_case("compare-models --figure inside a model", _trained_rf, lambda x: x.lcflow(
        "compare-models", "--assessments", x.tmp / "a.json", "--models", x.tmp / "model", "--out", x.tmp / "c.tsv",
        "--figure", x.tmp / "model" / "c.png"), "--figure {tmp}/model/c.png lies inside the input directory --models"),
    guard_case("tune-summary --out is the study's journal", _study, lambda x: x.lcflow(
        "tune-summary", "--study", x.tmp / "study", "--out", x.tmp / "study" / "journal.log"),
        "--out {tmp}/study/journal.log is journal.log of the input --study {tmp}/study"),
    guard_case("tune-summary --out where its trials table goes", _study, lambda x: x.lcflow(
        "tune-summary", "--study", x.tmp / "study", "--out", x.tmp / "study" / "trials.csv"),
        "--out and --out's trials.csv name the same file {tmp}/study/trials.csv"),
    guard_case("tune --out is the study's journal", _study, lambda x: x.lcflow(
        "tune", "--model", "rf", "--samples", x.stages["samples2018"], "--study", x.tmp / "study", "--trials", 1,
        "--out", x.tmp / "study" / "journal.log"), "--out {tmp}/study/journal.log is journal.log of the input --study"),
    guard_case("train --out is the samples table", lambda x: _own(x, "samples2018", "s.parquet"), lambda x: x.lcflow(
        "train", "--model", "rf", "--samples", x.tmp / "s.parquet", "--out", x.tmp / "s.parquet"),
        "--out {tmp}/s.parquet is a file, not a directory: name a directory to write into"),
    guard_case("train with its samples inside --out", lambda x: (x.tmp / "m").mkdir() or _own(x, "samples2018", "m/s.parquet"),
               lambda x: x.lcflow("train", "--model", "rf", "--samples", x.tmp / "m" / "s.parquet", "--out", x.tmp / "m"),
               "the input --samples {tmp}/m/s.parquet lies inside the output directory --out {tmp}/m"),
    guard_case("design-sample --out is a directory", lambda x: (x.tmp / "points").mkdir() or _own(x, "labels", "map.tif"),
               lambda x: x.lcflow("design-sample", "--map", x.tmp / "map.tif", "--out", x.tmp / "points"),
               "--out {tmp}/points is a directory, not a file: name the file to write"),
    guard_case("sample --out is the labels", lambda x: _own(x, "labels"), lambda x: x.lcflow(
        "sample", "--cube", x.stages["cube2018"], "--valid", x.stages["valid2018"], "--labels", x.tmp / "labels.tif",
        "--tile", "31UFT", "--year", 2018, "--out", x.tmp / "labels.tif"),
        "--out {tmp}/labels.tif is the input --labels {tmp}/labels.tif"),
    guard_case("blend --out is a member", _with(_trained_rf, lambda x: _trained_rf(x, "other")), lambda x: x.lcflow(
        "blend", "--members", x.tmp / "model", x.tmp / "other", "--out", x.tmp / "model"),
        "--out {tmp}/model is the input --members {tmp}/model"),
    guard_case("blend-maps --out is a member's probabilities", lambda x: _own(x, "labels", "p.tif"), lambda x: x.lcflow(
        "blend-maps", "--model-dir", x.tmp / "blend", "--member-probabilities", x.tmp / "p.tif", "--out", x.tmp / "p.tif",
        "--confidence", x.tmp / "c.tif"), "--out {tmp}/p.tif is the input --member-probabilities {tmp}/p.tif"),
    guard_case("consistent-maps --changes is a year's probabilities", lambda x: _own(x, "labels", "p.tif"),
               lambda x: x.lcflow("consistent-maps", "--probabilities", x.tmp / "p.tif", x.tmp / "q.tif", "--years",
                                  2018, 2019, "--out", x.tmp / "m18.tif", x.tmp / "m19.tif", "--confidence",
                                  x.tmp / "c18.tif", x.tmp / "c19.tif", "--changes", x.tmp / "p.tif", "--summary",
                                  x.tmp / "s.json"),
               "--changes {tmp}/p.tif is the input --probabilities {tmp}/p.tif"),
    guard_case("summarize-changes --out is a summary", lambda x: (x.tmp / "s.json").write_text("{}"), lambda x: x.lcflow(
        "summarize-changes", "--summaries", x.tmp / "s.json", "--out", x.tmp / "s.json"),
        "--out {tmp}/s.json is the input --summaries {tmp}/s.json"),
    guard_case("change-figure --out is the summary", lambda x: (x.tmp / "s.json").write_text("{}"), lambda x: x.lcflow(
        "change-figure", "--change", x.tmp / "ch.tif", "--summary", x.tmp / "s.json", "--out", x.tmp / "s.json"),
        "--out {tmp}/s.json is the input --summary {tmp}/s.json"),
    guard_case("label-reference --out is the points", lambda x: (x.tmp / "p.gpkg").write_text("x"), lambda x: x.lcflow(
        "label-reference", "--points", x.tmp / "p.gpkg", "--truth", x.tmp / "t.tif", "--out", x.tmp / "p.gpkg"),
        "--out {tmp}/p.gpkg is the input --points {tmp}/p.gpkg"),
    guard_case("job-resources --out inside the benchmarks folder",
               lambda x: (x.tmp / "bench").mkdir() or (x.tmp / "bench" / "a.tsv").write_text("s\n1\n"),
               lambda x: x.lcflow("job-resources", "--benchmarks", x.tmp / "bench", "--out", x.tmp / "bench" / "r.tsv"),
               "--out {tmp}/bench/r.tsv lies inside the input directory --benchmarks {tmp}/bench"),
]

CASES = CONFIG_CASES + LAYERED_CASES + COMMAND_CASES + GUARD_CASES


def snapshot(root: Path) -> dict[str, str]:
    """Every file and directory under ``root``, files by their SHA-256."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


def expected_lines() -> dict[str, str]:
    return yaml.safe_load(MESSAGES.read_text())


def places(ctx: Ctx) -> dict[str, str]:
    """What differs between runs in a message line, and its placeholder in the reviewed lines."""
    return {"{server}": ctx.server, "{tmp}": str(ctx.tmp), "{demo}": str(ctx.demo), "{results}": str(ctx.stages["root"]),
            "{root}": str(ROOT), "{next_year}": str(THIS_YEAR + 1), "{this_year}": str(THIS_YEAR)}




#: the stage of each command, whose test module runs its cases (tests/cli/test_bad_inputs_STAGE.py)
STAGE_OF = {
    "config": "config", "check-config": "config",
    "search": "retrieve", "stage": "retrieve", "cube": "retrieve",
    "labels": "labels", "sample": "labels", "label-reference": "labels",
    "synth": "synth", "synth-catalog": "synth",
    "train": "train", "evaluate": "train", "blend": "train", "learning-curve": "train",
    "tune": "tune", "tune-summary": "tune",
    "predict": "maps", "blend-maps": "maps", "consistent-maps": "maps", "quicklook": "maps", "change-figure": "maps",
    "stac-item": "maps", "stac-catalog": "maps", "summarize-changes": "maps",
    "assess": "assess", "design-sample": "assess", "summarize": "assess", "compare-models": "assess",
    "job-resources": "report",
}
STAGES = sorted(set(STAGE_OF.values()))


def stage_of(case: Case) -> str:
    """A case's stage, from the command its name begins with (a path guard's: the command after ``guard:``)."""
    name = case.name.removeprefix("guard: ")
    return STAGE_OF[re.split(r"[: ]", name, maxsplit=1)[0]]


def cases_of(stage: str) -> list[Case]:
    """The catalogue's cases of ``stage``."""
    return [c for c in CASES if stage_of(c) == stage]


def check_case(case: Case, demo, stages, tmp_path, capsys) -> None:
    """Run ``case`` in a fresh context: its exit code, its one line (the reviewed one), and what it left."""
    ctx = Ctx(tmp_path, demo, stages, capsys)
    if case.setup is not None:
        case.setup(ctx)
    guarded = ctx.tmp if case.guards == "tmp" else ctx.out
    before = snapshot(guarded)
    code, lines = case.run(ctx)
    assert code == case.code, lines
    if case.code:
        assert len(lines) == 1 and "Traceback" not in lines[0], lines
        assert case.message.replace("{tmp}", str(tmp_path)) in lines[0], lines
        record = os.environ.get("LCFLOW_RECORD_MESSAGES")  # a file to collect new cases' lines in, for review
        if record:
            line = lines[0]
            for mark, value in places(ctx).items():
                line = line.replace(value, mark)
            with open(record, "a") as fh:
                fh.write(yaml.safe_dump({case.name: line}, width=10**6, allow_unicode=True))
        else:
            expected = expected_lines()[case.name]
            for mark, value in places(ctx).items():
                expected = expected.replace(mark, value)
            assert lines[0] == expected, lines
    if case.state == "absent":
        leftovers = sorted(str(p.relative_to(ctx.out)) for p in ctx.out.rglob("*")) if ctx.out.exists() else []
        assert leftovers == [], leftovers  # no output, no staging file, no empty directory
    elif case.state == "unchanged":
        assert before, "an unchanged case must have something to keep"
        assert snapshot(guarded) == before  # nothing added, removed or rewritten


