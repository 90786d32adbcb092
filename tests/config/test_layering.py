"""Configs layered over one another: `key: null` unsets what a file below set, and the combination the
user ends with is checked (warnings for what is set but unused or not there yet)."""

import copy

import pytest
import yaml

from lcflow import config
from lcflow.config import cross_stage
from lcflow.errors import LcflowError

from ..conftest import ROOT

DEMO = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def test_null_unsets_a_key_the_schema_has_no_null_for_and_keeps_the_others():
    cfg = copy.deepcopy(DEMO)
    cfg.update(demo=None, colour=None)
    cfg["labels"].update(corine=None, mapping=None)
    cfg["model_params"]["rf"] = None
    cfg["aoi"]["31UFT"] = None
    removed = config.unset_nulls(cfg)
    assert sorted(removed) == [("demo",), ("labels", "corine"), ("model_params", "rf")]
    assert "demo" not in cfg and "corine" not in cfg["labels"] and "rf" not in cfg["model_params"]
    # null is a value of these: kept as given; an unknown key is kept for the schema's check to name
    assert cfg["labels"]["mapping"] is None and cfg["aoi"]["31UFT"] is None and cfg["colour"] is None


def test_model_params_of_a_model_not_trained_are_named_in_a_warning(tmp_path, caplog):
    cfg = copy.deepcopy(DEMO)
    cfg["model_params"]["presto"] = {"epochs": 3}
    with caplog.at_level("WARNING", logger="lcflow"):
        config.check(cfg, SCHEMA, base=tmp_path)
    assert [r.getMessage() for r in caplog.records] == [
        "config: model_params.presto is set, but presto is not one of models ['rf', 'lstm', 'tempcnn']: its "
        "parameters are not used"]


def test_tile_years_not_labelled_yet_are_named_and_none_at_all_is_refused(tmp_path, caplog):
    from .test_own_nomenclature import own_points

    (tmp_path / "reference").mkdir()
    own_points(tmp_path / "reference" / "31UFT_2018.gpkg", (21, 31))
    cfg = copy.deepcopy(DEMO)
    cfg["assess"]["reference"] = "reference/{tile}_{year}.gpkg"
    with caplog.at_level("WARNING", logger="lcflow"):
        config.check(cfg, SCHEMA, base=tmp_path)
    assert [r.getMessage() for r in caplog.records] == [
        "config: assess.reference = 'reference/{tile}_{year}.gpkg': no labelled file yet for 31UFT 2019, 32ULC 2018, "
        "32ULC 2019; those maps are assessed without a reference sample until it is there, and again after"]
    cfg["assess"]["reference"] = "referenc/{tile}_{year}.gpkg"
    with pytest.raises(LcflowError, match=r"no file for any tile-year \(the first would be 'referenc/31UFT_2018.gpkg'\)"):
        config.check(cfg, SCHEMA, base=tmp_path)


@pytest.mark.parametrize("results", ["results", ".", "out/run1"])
def test_an_input_where_the_workflow_writes_is_refused_wherever_results_is(results, tmp_path):
    """Inside results (or, where results is the working directory, inside the folders the workflow writes
    there) an input is refused; beside them it is not."""
    cfg = copy.deepcopy(DEMO)
    cfg["results"] = results
    prefix = "" if results == "." else f"{results}/"
    for inside in (f"{prefix}reference/{{tile}}_{{year}}_design.gpkg", f"{prefix}31UFT/{{year}}.gpkg"):
        cfg["assess"]["reference"] = inside
        with pytest.raises(cross_stage.BadValue, match="lies inside"):
            cross_stage._check_inputs_outside_results(cfg, tmp_path, "corine")
    cfg["assess"]["reference"] = "labelled/{tile}_{year}.gpkg"
    cross_stage._check_inputs_outside_results(cfg, tmp_path, "corine")
