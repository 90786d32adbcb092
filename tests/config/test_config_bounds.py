"""Every number of the configuration has a plausible range: a value inside is accepted, a value outside is
refused before any job, in one line naming the key, the value and the range. Values are drawn by Hypothesis
(derandomized in CI, see conftest)."""

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lcflow import config
from lcflow.defaults import SCHEMA, schema
from lcflow.errors import LcflowError
from lcflow.train.models import hyperparameters

from ..conftest import ROOT

DEMO = config.merge([ROOT / "config" / "config.yaml"])


def numeric_keys(node: dict, path: tuple = ()) -> list[tuple[tuple, dict]]:
    """(key path, its schema) of every number or integer of the schema (list items excepted)."""
    found = []
    for key, sub in (node.get("properties") or {}).items():
        types = sub.get("type")
        types = types if isinstance(types, list) else [types]
        if "integer" in types or "number" in types:
            found.append(((*path, key), sub))
        found += numeric_keys(sub, (*path, key))
    return found


NUMBERS = numeric_keys(schema())
#: keys whose value other checks constrain too (the sum of the fractions, the label year, tiles' areas)
ENTANGLED = {("sample", "fractions", "train"), ("sample", "fractions", "val"), ("sample", "fractions", "test"),
             ("labels", "year")}


def test_every_number_has_both_bounds():
    unbounded = [".".join(p) for p, s in NUMBERS
                 if not ({"minimum", "exclusiveMinimum"} & set(s) and {"maximum", "exclusiveMaximum"} & set(s))]
    assert not unbounded, f"numbers without a lower and an upper bound: {unbounded}"
    for model, table in hyperparameters.MODELS.items():
        for name, param in table.items():
            for form in (param, *param.also):
                if form.kind in ("int", "float") and name != "max_features":
                    assert form.low is not None and form.high is not None, f"{model}.{name} has no range"


def with_value(path: tuple, value) -> dict:
    cfg = copy.deepcopy(DEMO)
    node = cfg
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return cfg


def outside(spec: dict):
    """Values beyond either bound of a schema number."""
    integer = spec.get("type") == "integer" or spec.get("type") == ["integer", "null"]
    choices = []
    if "maximum" in spec or "exclusiveMaximum" in spec:
        top = spec.get("maximum", spec.get("exclusiveMaximum"))
        start = top + (1 if "maximum" in spec else 0)
        choices.append(st.integers(int(start), int(start) + 10**9) if integer else
                       st.floats(min_value=start, max_value=start * 1e6 + 1e6, exclude_min="maximum" in spec))
    if "minimum" in spec or "exclusiveMinimum" in spec:
        bottom = spec.get("minimum", spec.get("exclusiveMinimum"))
        end = bottom - (1 if "minimum" in spec else 0)
        choices.append(st.integers(int(end) - 10**9, int(end)) if integer else
                       st.floats(min_value=end - 1e9, max_value=end, exclude_max="minimum" in spec))
    return st.one_of(choices)


@settings(deadline=None)
@given(data=st.data())
def test_a_number_outside_its_range_is_refused_naming_key_value_and_range(data):
    path, spec = data.draw(st.sampled_from([(p, s) for p, s in NUMBERS if p not in ENTANGLED]), label="key")
    value = data.draw(outside(spec), label="value")
    with pytest.raises(LcflowError) as refused:
        config.check(with_value(path, value), SCHEMA)
    message = str(refused.value)
    assert message.startswith(f"config: {'.'.join(path)} = {value!r} is outside "), message
    assert "\n" not in message


@settings(deadline=None)
@given(data=st.data())
def test_a_number_inside_its_range_is_accepted(data):
    simple = [(p, s) for p, s in NUMBERS if p not in ENTANGLED and p[0] in ("cube", "predict", "consistency", "stac")]
    path, spec = data.draw(st.sampled_from(simple), label="key")
    low = spec.get("minimum", spec.get("exclusiveMinimum"))
    high = spec.get("maximum", spec.get("exclusiveMaximum"))
    if spec.get("type") in ("integer", ["integer", "null"]):
        value = data.draw(st.integers(int(low), int(high)), label="value")
    else:
        value = data.draw(st.floats(low, high, exclude_min="exclusiveMinimum" in spec,
                                    exclude_max="exclusiveMaximum" in spec), label="value")
    config.check(with_value(path, value), SCHEMA)  # raises on refusal


NUMERIC_PARAMS = [(model, name, form) for model, table in hyperparameters.MODELS.items() for name, param in table.items()
                  for form in [param] if form.kind in ("int", "float")]


@settings(deadline=None)
@given(data=st.data())
def test_a_model_parameter_outside_its_range_is_refused(data):
    model, name, param = data.draw(st.sampled_from(NUMERIC_PARAMS), label="parameter")
    integer = param.kind == "int"
    above = st.integers(int(param.high) + 1, int(param.high) + 10**9) if integer else \
        st.floats(param.high, param.high * 1e6 + 1e6, exclude_min=not param.high_open)
    below = st.integers(int(param.low) - 10**9, int(param.low) - 1) if integer else \
        st.floats(param.low - 1e9, param.low, exclude_max=not param.low_open)
    value = data.draw(st.one_of(above, below), label="value")
    with pytest.raises(LcflowError) as refused:
        config.check(with_value(("model_params", model, name), value), SCHEMA)
    assert str(refused.value).startswith(f"config: model_params.{model}.{name} = {value!r}: expected "), \
        str(refused.value)


def test_the_three_absurd_values_of_the_review_are_refused():
    for path, value, said in [(("cube", "resolution"), 125442, "config: cube.resolution = 125442 is outside [1, 1000]"),
                              (("model_params", "lstm", "num_layers"), 3916,
                               "config: model_params.lstm.num_layers = 3916: expected an integer in [1, 16]"),
                              (("model_params", "lstm", "batch_size"), 201241,
                               "config: model_params.lstm.batch_size = 201241: expected an integer in [1, 65536]")]:
        with pytest.raises(LcflowError) as refused:
            config.check(with_value(path, value), SCHEMA)
        assert str(refused.value) == said


def _config_options():
    """(command, option, config key, argparse action) of every option that sets a config key."""
    from lcflow.cli import parser

    for name, command in parser().parse_args(["check-config"]).commands.items():
        for action in command._actions:
            key = getattr(action.type, "config_key", None)
            if key:
                yield name, action.option_strings[-1], key, action


def test_a_command_takes_what_the_config_takes_and_refuses_what_it_refuses():
    """One table of bounds, the schema: an option that sets a config key accepts its bounds, refuses the
    nearest values outside, and defaults to the config's default."""
    import argparse

    from lcflow.defaults import default, node

    options = list(_config_options())
    assert {o for _, o, _, _ in options} >= {"--clean-tree-rows", "--trials", "--block", "--rendezvous-minutes",
                                             "--per-class", "--evidence-ratio", "--http-timeout"}
    for command, option, key, action in options:
        spec = node(key)
        integer = "integer" in str(spec["type"])
        step = 1 if integer else 1e-9 * max(1.0, abs(spec.get("maximum", spec.get("exclusiveMaximum", 1))))
        for bound, inside in (("minimum", True), ("maximum", True), ("exclusiveMinimum", False),
                              ("exclusiveMaximum", False)):
            if bound not in spec:
                continue
            value = spec[bound]
            if inside:
                assert action.type(str(value)) == value, (command, option, value)
            beyond = value - step if "inimum" in bound else value + step
            for refused in ([beyond] if inside else [value, beyond]):
                with pytest.raises(argparse.ArgumentTypeError, match=rf"is outside .*\({key}"):
                    action.type(repr(refused) if not integer else str(refused))
        # a settings option (lcflow.common.settings) has no default of its own: the settings' is the schema's
        if action.default not in (None, argparse.SUPPRESS) and spec.get("default") is not None:
            assert action.default == default(key), (command, option)


@pytest.mark.parametrize("path, value, said", [
    (("cube", "min_clear_fraction"), float("nan"), "config: cube.min_clear_fraction = nan is not a number"),
    (("cube", "resolution"), float("nan"), "config: cube.resolution = nan is not a number"),
    (("sample", "per_class"), float("inf"), "config: sample.per_class = inf is not a number"),
    (("model_params", "rf", "n_estimators"), float("-inf"), "config: model_params.rf.n_estimators = -inf is not a number"),
    (("years",), [2018.0], "config: years[0] = 2018.0 is not a whole number (write it without a decimal point)"),
])
def test_nan_infinities_and_whole_numbers_written_as_floats_are_refused(path, value, said):
    with pytest.raises(LcflowError) as refused:
        config.check(with_value(path, value), SCHEMA)
    assert str(refused.value).startswith(said), str(refused.value)


#: nine levels of nine aliases: 557 bytes of YAML that expand to 9^9 (387 million) values
BOMB = "".join(f"  - &{c} [{', '.join([f'*{p}' if p else '31UFT'] * 9)}]\n"
               for p, c in zip(["", *"abcdefgh"], "abcdefghi"))


@pytest.mark.parametrize("key", ["tiles", "model_params.rf.n_estimators"])
def test_a_yaml_alias_bomb_under_a_known_key_is_refused_at_once(key, tmp_path, capsys):
    import time

    from lcflow.cli import main

    text = (ROOT / "config" / "config.yaml").read_text()
    if key == "tiles":
        text = text.replace("tiles: [31UFT, 32ULC]", "tiles:\n" + BOMB)
    else:
        text = text.replace("  rf: {n_estimators: 300}\n", "  rf:\n    n_estimators:\n"
                            + BOMB.replace("  - ", "      - "), 1)
    assert "&i" in text and len(BOMB) < 600
    (tmp_path / "c.yaml").write_text(text)
    began = time.monotonic()
    code = main(["check-config", "--configfile", str(tmp_path / "c.yaml"), "--directory", str(tmp_path)])
    took = time.monotonic() - began
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and took < 10, (took, err)
    assert err[0].startswith(f"lcflow check-config: error: config: {key.split('.')[0]}") and \
        "expands to more than 100,000 values (YAML aliases nested in aliases): write the values out" in err[0], err
