"""lcflow.common.settings: a stage's settings are its config section, one field a key of the same name,
defaulted and checked by the schema once; the command line and the rules make the same settings."""

import argparse
import dataclasses
import json

import pytest

from lcflow.common.settings import ConfigSection
from lcflow.defaults import node
from lcflow.errors import LcflowError
from lcflow.labels.sample_settings import CleanSettings, SampleSettings, TransferSettings
from lcflow.maps.consistency_settings import ConsistencySettings
from lcflow.retrieve.cube_settings import CubeSettings
from lcflow.retrieve.stage_settings import StageSettings
from lcflow.tune.hpo_settings import HpoSettings

#: every stage's settings class, and the sections nested in them (a new one is added here)
SETTINGS = [CubeSettings, SampleSettings, CleanSettings, TransferSettings, ConsistencySettings, StageSettings,
            HpoSettings]


def _defaults(section: dict) -> dict:
    """A section's defaults as the schema writes them, a nested section's its own keys' defaults (a mapping
    key whose entries have no default, such as hpo.space, is its default)."""
    return {key: _defaults(spec["properties"]) if _nested(spec) else spec["default"] for key, spec in section.items()}


def _nested(spec: dict) -> bool:
    return spec.get("default") == {} and all("default" in p for p in spec.get("properties", {None: {}}).values())


@pytest.mark.parametrize("cls", SETTINGS, ids=lambda c: c.SECTION)
def test_a_stage_s_settings_are_its_config_section_key_for_key(cls):
    """The same names, the schema's defaults: a key has one name from the YAML to the code."""
    section = node(cls.SECTION)["properties"]
    assert [f.name for f in dataclasses.fields(cls)] == list(section)
    assert cls().as_config() == _defaults(section)


def test_a_nested_section_is_made_from_a_mapping_and_named_in_its_errors():
    settings = SampleSettings(clean={"trees": 50}, transfer={"mad_k": 0})
    assert isinstance(settings.clean, CleanSettings) and settings.clean.trees == 50 and settings.transfer.mad_k == 0
    assert settings.clean.folds == node("sample.clean.folds")["default"]
    assert SampleSettings.from_config(json.loads(settings.to_json())) == settings
    with pytest.raises(LcflowError, match=r"^sample\.clean\.folds = 1 is outside \[2, 50\]"):
        SampleSettings(clean={"folds": 1})
    with pytest.raises(LcflowError, match=r"^unknown key 'fold' in sample\.clean"):
        SampleSettings(clean={"fold": 3})
    with pytest.raises(LcflowError, match=r"^sample\.fractions: 'test' is a required property"):
        SampleSettings(fractions={"train": 0.8, "val": 0.2})


def test_nested_keys_have_options_of_their_path_and_null_and_booleans_can_be_given():
    parser = argparse.ArgumentParser()
    SampleSettings.add_options(parser)
    given = SampleSettings.from_options(parser.parse_args(
        ["--settings", '{"clean": {"trees": 50}}', "--clean-tree-rows", "none", "--clean-reference-data",
         "--transfer-mad-k", "2.5", "--fractions", '{"train": 0.5, "val": 0.25, "test": 0.25}']))
    assert (given.clean.trees, given.clean.tree_rows, given.clean.reference_data) == (50, None, True)
    assert given.transfer.mad_k == 2.5 and given.fractions == {"train": 0.5, "val": 0.25, "test": 0.25}
    off = SampleSettings.from_options(parser.parse_args(["--settings", '{"clean": {"reference_data": true}}',
                                                         "--no-clean-reference-data"]))
    assert off.clean.reference_data is False


@pytest.mark.parametrize(("values", "message"), [
    ({"dilation_px": 60}, "cube.dilation_px = 60 is outside [0, 50]"),
    ({"fill_gaps": "cubic"}, "cube.fill_gaps = 'cubic' is not one of ['none', 'linear']"),
    ({"invalid_scl": [3, 12]}, "cube.invalid_scl[1] = 12 is outside [0, 11]"),
    ({"indices": ["NDVI", "NDVI"]}, "cube.indices = ['NDVI', 'NDVI']: ['NDVI', 'NDVI'] has non-unique elements"),
    ({"bands": ["B04", "B04"]}, "band(s) B04 given more than once"),
    ({"time_steps": "12"}, "cube.time_steps = '12': '12' is not of type 'integer'"),
])
def test_a_value_the_schema_refuses_is_refused_naming_its_key(values, message):
    with pytest.raises(LcflowError) as refused:
        CubeSettings(**values)
    assert str(refused.value).startswith(message), str(refused.value)


def test_keys_the_rules_act_on_have_no_option_but_travel_in_settings():
    """stage.where, stage.slurm_partition and stage.keep decide where the rule runs and what it removes: the
    stage command offers no option for them, and takes them in --settings as the rule hands over the section."""
    parser = argparse.ArgumentParser()
    StageSettings.add_options(parser)
    options = {o for action in parser._actions for o in action.option_strings}
    assert {"--mode", "--dir", "--connections", "--settings"} <= options
    assert not {"--where", "--slurm-partition", "--keep", "--no-keep"} & options
    given = StageSettings.from_options(parser.parse_args(
        ["--settings", '{"where": "slurm", "slurm_partition": "dm", "keep": false, "dir": "a"}', "--dir", "b"]))
    assert (given.where, given.slurm_partition, given.keep, given.dir) == ("slurm", "dm", False, "b")
    with pytest.raises(LcflowError, match=r"^stage\.where = 'login' is not one of \['host', 'slurm'\]"):
        StageSettings(where="login")


def test_a_study_s_worker_is_handed_its_model_s_space_and_no_key_of_the_rules():
    """hpo.models and hpo.workers are the rules' (which studies, how many jobs), hpo.space a model's own:
    what a worker's rule hands over changes with neither, so studying another model, or with more workers,
    reruns none of this study's jobs. The command makes its own --space (a file), so none is generated."""
    spaces = {"rf": {"min_samples_leaf": {"low": 1, "high": 4}}, "lstm": {"dropout": {"low": 0.1, "high": 0.5}}}
    settings = HpoSettings(models=["rf", "lstm"], workers=2, trials=7, space=spaces)
    handed = json.loads(settings.worker_json("lstm"))
    assert handed["space"] == {"lstm": spaces["lstm"]} and handed["trials"] == 7
    assert not {"models", "workers"} & set(handed)
    grown = HpoSettings(models=["rf", "lstm", "tempcnn"], workers=4, trials=7,
                        space={**spaces, "rf": {"max_features": {"choices": ["sqrt"]}}})
    assert grown.worker_json("lstm") == settings.worker_json("lstm") != grown.worker_json("rf")
    assert json.loads(HpoSettings().worker_json("rf"))["space"] == {}
    parser = argparse.ArgumentParser()
    HpoSettings.add_options(parser)
    options = {o for action in parser._actions for o in action.option_strings}
    assert {"--trials", "--pruner", "--storage", "--settings"} <= options
    assert not {"--space", "--models", "--workers"} & options
    given = HpoSettings.from_options(parser.parse_args(["--settings", settings.worker_json("lstm"), "--trials", "3"]))
    assert (given.trials, given.space_of("lstm"), given.space_of("rf")) == (3, spaces["lstm"], None)
    # the sampler draws a space's parameters in their order: the config's, kept
    unsorted = {"learning_rate": {"low": 0.001, "high": 0.01}, "dropout": {"low": 0.1, "high": 0.5}}
    handed = json.loads(HpoSettings(space={"lstm": unsorted}).worker_json("lstm"))["space"]["lstm"]
    assert list(handed) == ["learning_rate", "dropout"]


def test_settings_are_frozen_and_their_lists_tuples():
    settings = CubeSettings(bands=["B04", "B08"])
    assert settings.bands == ("B04", "B08") and settings.as_config()["bands"] == ["B04", "B08"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.block_px = 64  # type: ignore[misc]
    assert CubeSettings.from_config(json.loads(settings.to_json())) == settings


def test_a_section_key_the_stage_does_not_take_is_refused():
    with pytest.raises(LcflowError, match=r"unknown key 'dilaton_px' in cube \(its keys: asset_bands, bands, "):
        CubeSettings.from_config({"dilaton_px": 2})


def _parse(*argv: str) -> CubeSettings:
    parser = argparse.ArgumentParser()
    CubeSettings.add_options(parser)
    return CubeSettings.from_options(parser.parse_args(list(argv)))


def test_the_command_line_makes_the_settings_the_rule_hands_it():
    """The rules pass the whole section (--settings); an option overrides its key; neither: the defaults."""
    section = CubeSettings(bands=["B04", "B08"], block_px=64, indices=["NDVI"], fill_gaps="linear").as_config()
    assert _parse("--settings", json.dumps(section)) == CubeSettings.from_config(section)
    assert _parse("--settings", json.dumps(section), "--block-px", "128", "--invalid-scl", "3,8").as_config() == {
        **section, "block_px": 128, "invalid_scl": [3, 8]}
    assert _parse() == CubeSettings()
    assert _parse("--bands", "B02,B03", "--indices", "").as_config() == {
        **CubeSettings().as_config(), "bands": ["B02", "B03"], "indices": []}


@pytest.mark.parametrize(("argv", "message"), [
    (["--block-px", "8"], "argument --block-px: 8 is outside [16, 4096] (cube.block_px)"),
    (["--invalid-scl", "3,x"], "argument --invalid-scl: '3,x' is not a comma-separated list of integers (cube.invalid_scl)"),
    (["--fill-gaps", "cubic"], "argument --fill-gaps: invalid choice: 'cubic'"),
    (["--settings", "[1]"], "argument --settings: '[1]' is not a JSON object"),
])
def test_a_bad_option_is_refused_by_the_parser_naming_it(argv, message, capsys):
    with pytest.raises(SystemExit):
        _parse(*argv)
    assert message in capsys.readouterr().err


def test_every_option_s_help_is_its_key_s_description_and_default():
    parser = argparse.ArgumentParser()
    CubeSettings.add_options(parser)
    helps = {a.dest: a.help for a in parser._actions}
    assert helps["setting_dilation_px"] == "cloud and shadow masks grown by this many pixels (at most 50: half a " \
                                           "kilometre at 10 m) (default: 1)"
    assert helps["setting_bands"].endswith("(default: B02,B03,B04,B05,B06,B07,B08,B8A,B11,B12)")
    # a key of choices: each choice's clause, not the first alone
    parser = argparse.ArgumentParser()
    StageSettings.add_options(parser)
    mode = {a.dest: a.help for a in parser._actions}["setting_mode"]
    assert mode.startswith("`auto`: remote assets are fetched, local ones read where they are; `fetch`: ")
    assert "`remote`: no stage-in" in mode and mode.endswith("(default: auto)")


def test_a_subclass_without_its_section_s_keys_fails_its_own_check():
    """A settings class whose fields are not its section's keys cannot be made: the schema refuses the key."""
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Misnamed(ConfigSection):
        SECTION = "cube"
        dilation: int = 1

    with pytest.raises(LcflowError, match="unknown key 'dilation' in cube"):
        Misnamed()


def test_a_number_key_holds_a_float_however_the_yaml_spelled_it():
    """``mad_k: 3`` and ``--transfer-mad-k 3`` make one setting, 3.0: what a table records of it (and the
    study fingerprints made from the table's bytes) does not hang on the spelling. Integers stay integers."""
    settings = SampleSettings.from_config({"transfer": {"mad_k": 3}, "min_valid_fraction": 1, "per_class": 5})
    assert settings.transfer.mad_k == 3.0 and isinstance(settings.transfer.mad_k, float)
    assert isinstance(settings.min_valid_fraction, float) and isinstance(settings.per_class, int)
    assert json.loads(settings.to_json())["transfer"]["mad_k"] == 3.0 and '"mad_k":3.0' in settings.to_json()
    assert isinstance(CubeSettings(resolution=20).resolution, float) and isinstance(CubeSettings().block_px, int)
