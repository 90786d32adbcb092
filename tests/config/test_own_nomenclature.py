"""A user's own nomenclature end to end before any job: labelled polygons of their own codes with their
mapping, labelled reference points checked against the same mapping; and a config of the cubes alone, with
no label source and no model."""

import copy

import geopandas as gpd
import numpy as np
import pytest
import yaml
from shapely.geometry import Point

from lcflow import config
from lcflow.errors import LcflowError

from ..conftest import ROOT, SMALL_AOI, corine_polygons

DEMO = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def own_labels(demo, folder, codes=(100, 200)) -> tuple[str, str]:
    """The demo's CORINE as polygons of the user's own two classes (``codes``: forest, the rest) and the
    mapping file of those codes."""
    polygons = corine_polygons(demo / "corine" / "clc_demo_3035.tif", "clc")
    polygons["own"] = np.where(polygons["clc"].str.startswith("3"), codes[0], codes[1])
    path = folder / "own.gpkg"
    polygons[["own", "geometry"]].to_file(path)
    mapping = folder / "own.csv"
    mapping.write_text(f"code,class_code,class_name\n{codes[0]},{codes[0]},forest\n{codes[1]},{codes[1]},other\n")
    return str(path), str(mapping)


def own_points(path, codes, crs="EPSG:32631", tile="31UFT", n=60, seed=0):
    """``n`` labelled points inside the tile's small area, their reference codes drawn from ``codes``."""
    rng = np.random.default_rng(seed)
    xmin, ymin, xmax, ymax = SMALL_AOI[tile]
    points = [Point(x, y) for x, y in zip(rng.uniform(xmin, xmax, n), rng.uniform(ymin, ymax, n))]
    gpd.GeoDataFrame({"reference": rng.choice(codes, n)}, geometry=points, crs=crs).to_file(path)
    return path


def _own_config(demo, tmp_path, codes=(100, 200)) -> dict:
    polygons, mapping = own_labels(demo, tmp_path, codes)
    cfg = copy.deepcopy(DEMO)
    cfg.pop("demo")
    cfg.update(aoi=dict(SMALL_AOI), stac={"catalog": str(demo / "catalog" / "catalog.json")})
    cfg["labels"] = {"reference": polygons, "code_column": "own", "mapping": mapping}
    cfg["assess"] = {"reference": str(tmp_path / "ref_{tile}_{year}.gpkg")}
    return cfg


@pytest.mark.parametrize("codes", [(1, 2), (100, 200)])
def test_reference_points_of_the_users_own_codes_pass_and_others_are_refused_naming_them(codes, demo, tmp_path):
    cfg = _own_config(demo, tmp_path, codes)
    own_points(tmp_path / "ref_31UFT_2018.gpkg", codes)
    config.check(cfg, SCHEMA, base=tmp_path)
    own_points(tmp_path / "ref_31UFT_2019.gpkg", (*codes, 300))
    with pytest.raises(LcflowError) as refused:
        config.check(cfg, SCHEMA, base=tmp_path)
    assert str(refused.value) == (
        f"config: assess.reference = '{tmp_path}/ref_31UFT_2019.gpkg': reference code(s) 300 are not classes of the "
        f"nomenclature (labels.mapping = '{tmp_path}/own.csv': {codes[0]}, {codes[1]})")


def test_reference_points_against_a_corine_level_are_checked_too(demo, tmp_path):
    cfg = copy.deepcopy(DEMO)
    cfg["assess"] = {"reference": str(tmp_path / "ref_{tile}_{year}.gpkg")}
    own_points(tmp_path / "ref_31UFT_2018.gpkg", (21, 31, 311))
    with pytest.raises(LcflowError, match=r"reference code\(s\) 311 are not classes of the nomenclature \(CORINE "
                                          r"level 2: 11, 12, 13, "):
        config.check(cfg, SCHEMA, base=ROOT)


def test_a_config_without_labels_and_models_checks_as_a_run_of_the_cubes_alone(tmp_path):
    cfg = copy.deepcopy(DEMO)
    for key in ("labels", "models", "hpo", "model_params", "assess"):
        cfg.pop(key, None)
    config.check(cfg, SCHEMA, base=ROOT)
    with pytest.raises(LcflowError) as refused:
        config.check({**cfg, "labels": DEMO["labels"]}, SCHEMA, base=ROOT)
    assert str(refused.value) == "config: labels is given without models: they go together (neither: the cubes only)"
    with pytest.raises(LcflowError, match=r"^config: models is given without labels"):
        config.check({**cfg, "models": ["rf"]}, SCHEMA, base=ROOT)
