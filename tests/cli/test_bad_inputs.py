"""The bad-input catalogue (tests/cli/bad_input_catalogue.py) as a whole: a few cases run as real processes to
show that the exit code is the process's, every case held once with its reviewed line and its stage, and
property-based tests that mutate a valid config and a valid samples table at random: whatever the mutation,
a command either succeeds or ends with one line and writes nothing. Each stage's cases run in
tests/cli/test_bad_inputs_STAGE.py.
"""

import copy
import json
import os
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lcflow.cli import main
from lcflow.errors import LcflowError
from lcflow.labels import samples_table as samples
from lcflow.retrieve.cube_settings import CubeSettings

from ..conftest import SMALL_AOI
from .bad_input_catalogue import (
    CASES,
    DEMO,
    SCHEMA,
    SMALL,
    STAGES,
    THIS_YEAR,
    Ctx,
    cases_of,
    corine_half,
    expected_lines,
    places,
    snapshot,
)


class ProcessCtx(Ctx):
    """A case's context whose ``lcflow`` is the installed command in a process of its own."""

    def lcflow(self, *args) -> tuple[int, list[str]]:
        import subprocess
        import sys

        done = subprocess.run([str(Path(sys.executable).parent / "lcflow"), *map(str, args)], capture_output=True,
                              text=True, timeout=300)
        return done.returncode, done.stderr.strip().splitlines()


@pytest.mark.parametrize("name", ["config: cube resolution of a tile's width", "train: infinite band value",
                                  "cube: zero block", "train: a bad table leaves the earlier model as it was"])
def test_a_refused_case_exits_2_as_a_process_with_its_line(name, demo, stages, tmp_path, capsys):
    """The catalogue runs lcflow's entry point in-process; run as the installed command, a case ends the
    process with exit code 2 and the same one line on stderr."""
    case = next(c for c in CASES if c.name == name)
    ctx = ProcessCtx(tmp_path, demo, stages, capsys)
    if case.setup is not None:
        case.setup(ctx)
    before = snapshot(ctx.out)
    code, lines = case.run(ctx)
    expected = expected_lines()[name]
    for mark, value in places(ctx).items():
        expected = expected.replace(mark, value)
    assert code == 2 and lines == [expected], lines
    if case.state == "unchanged" and case.guards == "out":
        assert snapshot(ctx.out) == before


def test_every_case_runs_in_its_stage_s_module():
    """Each case's command names a stage, and that stage's module runs it: no case left out, none twice."""
    modules = {stage: Path(__file__).with_name(f"test_bad_inputs_{stage}.py") for stage in STAGES}
    assert all(m.is_file() for m in modules.values()), [str(m) for m in modules.values() if not m.is_file()]
    assert sorted(c.name for stage in STAGES for c in cases_of(stage)) == sorted(c.name for c in CASES)
    assert all(cases_of(stage) for stage in STAGES)


def test_the_catalogue_holds_every_case_once_with_a_telling_fragment_and_its_line():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)) and len(CASES) >= 80
    short = [c.name for c in CASES if c.code and len(c.message) < 30]
    assert not short, short
    lines = expected_lines()
    assert sorted(lines) == sorted(c.name for c in CASES if c.code)  # one reviewed line a refused case, no stale one
    for case in CASES:
        if case.code:
            line = lines[case.name].replace("{next_year}", str(THIS_YEAR + 1)).replace("{this_year}", str(THIS_YEAR))
            assert case.message in line, case.name
    assert {c.state for c in CASES} == {"absent", "unchanged", "ok"}
    assert sum(c.state == "unchanged" and c.guards == "out" for c in CASES) >= 3


# ------------------------------------------------------------------------------------ property-based


def _paths(node, prefix=()):
    """Every (path, value) of a config, leaves and inner nodes."""
    yield prefix, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


CONFIG_PATHS = [p for p, _ in _paths(DEMO) if p]
JUNK = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                 st.text(max_size=12), st.lists(st.integers(-5, 5), max_size=5),
                 st.dictionaries(st.text(max_size=6), st.integers(), max_size=3))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(CONFIG_PATHS), value=JUNK, add_key=st.booleans())
def test_any_config_mutation_is_accepted_or_refused_in_one_line(path, value, add_key, tmp_path_factory, capsys):
    cfg = copy.deepcopy(DEMO)
    node = cfg
    for k in path[:-1]:
        node = node[k]
    if add_key and isinstance(node, dict):
        node[f"{path[-1]}_x"] = value
    else:
        node[path[-1]] = value
    d = tmp_path_factory.mktemp("cfg")
    (d / "c.yaml").write_text(yaml.safe_dump(cfg))
    capsys.readouterr()
    code = main(["check-config", "--configfile", str(d / "c.yaml"), "--directory", str(d)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code in (0, 2), err
    # the schema, read apart from lcflow: a config it refuses must be refused (lcflow adds checks of its own),
    # once a null has unset its key (a layered config's way to drop what a file below set)
    from lcflow.config import unset_nulls

    unset_nulls(cfg)
    schema_errors = list(jsonschema.Draft202012Validator(yaml.safe_load(SCHEMA.read_text())).iter_errors(cfg))
    if schema_errors:
        assert code == 2, (path, value, schema_errors[0].message)
    if code:
        assert len(err) == 1 and err[0].startswith("lcflow check-config: error: config: "), err
    assert sorted(p.name for p in d.iterdir()) == ["c.yaml"]


def _mutations(frame: pd.DataFrame):
    bands = [c for c in frame.columns if "_t" in c]
    return st.one_of(
        st.tuples(st.just("cell"), st.sampled_from(bands), st.integers(0, len(frame) - 1),
                  st.sampled_from([np.inf, -np.inf, "x", None])),
        st.tuples(st.just("drop"), st.sampled_from(list(frame.columns)), st.just(0), st.just(None)),
        st.tuples(st.just("rename"), st.sampled_from(bands), st.just(0), st.sampled_from(["B13_t00", "B04_t99", "b04_t00"])),
        st.tuples(st.just("label"), st.just("label"), st.integers(0, len(frame) - 1),
                  st.sampled_from([-1, 70000, 1.5, None, "forest"])),
        st.tuples(st.just("split"), st.just("split"), st.integers(0, len(frame) - 1), st.sampled_from(["training", "", None])),
        st.tuples(st.just("blank"), st.sampled_from(["train", "val", "test"]), st.just(0), st.just(None)),
    )


@pytest.fixture(scope="module")
def small_table(stages) -> pd.DataFrame:
    frame = pd.read_parquet(stages["samples2018"])
    keep = frame.groupby("label").head(8).index
    return frame.loc[keep, ["label", "split"] + [f"{b}_t{k:02d}" for k in range(12) for b in ("B04", "B08")]]


def _must_refuse(kind: str, column: str, value) -> bool:
    """Mutations that leave no valid table: lcflow has to refuse them (others may train)."""
    if kind == "cell":
        return isinstance(value, str) or (isinstance(value, float) and np.isinf(value))
    if kind == "label":
        return value is not None
    if kind == "split":
        return value is not None
    if kind == "drop":
        return column != "split"
    return kind == "rename" or (kind == "blank" and column == "train")


def _storable(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """The mutated column as parquet can hold it: text where any value is text, else numbers."""
    values = frame[column]
    if any(isinstance(v, str) for v in values):
        return frame.assign(**{column: values.map(lambda v: None if v is None else str(v)).astype("string")})
    return frame.assign(**{column: pd.to_numeric(values)})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_table_mutation_trains_or_is_refused_in_one_line(data, small_table, tmp_path_factory, capsys):
    """Whatever the mutation, the table is written and handed to lcflow train: a table that cannot be valid
    is refused in one line naming it, leaving no model; one that is accepted trains a complete model."""
    kind, column, row, value = data.draw(_mutations(small_table))
    frame = small_table.copy().reset_index(drop=True)
    if kind in ("cell", "label", "split"):
        frame[column] = frame[column].astype(object)
        frame.loc[row, column] = value
        frame = _storable(frame, column)
    elif kind == "drop":
        frame = frame.drop(columns=[column])
    elif kind == "rename":
        frame = frame.rename(columns={column: value})
    else:  # blank: a whole split without any observation
        bands = [c for c in frame.columns if "_t" in c]
        frame.loc[frame["split"] == column, bands] = np.nan
    d = tmp_path_factory.mktemp("table")
    frame.to_parquet(d / "t.parquet")
    capsys.readouterr()
    code = main(["train", "--model", "rf", "--samples", str(d / "t.parquet"), "--out", str(d / "m"),
                 "--set", "n_estimators=5", "--set", "n_jobs=1"])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line]
    assert code in (0, 2), err
    if _must_refuse(kind, column, value):
        assert code == 2, (kind, column, value)
    if code:
        assert len(err) == 1 and "Traceback" not in err[0] and err[0].startswith("lcflow train: error: "), err
        assert str(d / "t.parquet") in err[0], err
        assert not (d / "m").exists()
    else:
        assert {"model.json", "model.skops", "metrics.json", "history.csv"} <= {p.name for p in (d / "m").iterdir()}
        assert json.loads((d / "m" / "metrics.json").read_text())["n_train"] > 0


# ------------------------------------------------------------------- interruptions and partial writes


def test_a_crash_while_writing_weights_leaves_no_half_model(stages, tmp_path, monkeypatch):
    from lcflow.train import training
    from lcflow.train.models import rf

    out = tmp_path / "rf"
    training.train("rf", [str(stages["samples2018"])], out, {"n_estimators": 5})

    def crash(self, path):
        Path(path).write_bytes(b"")  # what a kill in the middle of writing leaves
        raise KeyboardInterrupt

    before = snapshot(out)
    monkeypatch.setattr(rf.Model, "save_weights", crash)
    with pytest.raises(KeyboardInterrupt):
        training.train("rf", [str(stages["samples2018"])], out, {"n_estimators": 6})
    # the new model is written in a staging folder and renamed in as a set: the earlier model stays whole,
    # byte for byte, and no staging is left
    assert snapshot(out) == before and not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    from lcflow.train.model_dirs.model_dir import TrainedModel

    assert TrainedModel.load(out).model.params["n_estimators"] == 5


def test_a_killed_writer_leaves_staging_files_that_the_next_run_removes(stages, tmp_path):
    from lcflow.common.atomic import staging_prefix
    from lcflow.retrieve import cube

    stale_dir = tmp_path / f"{staging_prefix(tmp_path / 'cube.tif')}4242-k1ll3d00"
    stale_file = tmp_path / f"{staging_prefix(tmp_path / 'valid.tif')}4242-x7x7x7x7.tif"
    ranks = tmp_path / f"{staging_prefix(tmp_path / 'cube.tif')}ranks"
    users = [tmp_path / ".cube.tif.swp", tmp_path / ".valid.tif.k1ll3d"]  # a user's own files beside the outputs
    for d in (stale_dir, ranks):
        d.mkdir()
        (d / "stage.tif").write_bytes(b"\0" * 1000)
    stale_file.write_bytes(b"\0")
    for f in users:
        f.write_text("mine")
    cube.run(stages["items2018"], "31UFT", 2018, tmp_path / "cube.tif", tmp_path / "valid.tif",
             CubeSettings(bands=["B04"]), bounds=SMALL)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["cube.tif", "valid.tif", *(f.name for f in users)])
    assert all(f.read_text() == "mine" for f in users)


def test_a_set_of_outputs_is_published_whole_or_not_at_all(tmp_path, monkeypatch):
    from lcflow.common import atomic

    old_map, old_conf = tmp_path / "map.tif", tmp_path / "conf.tif"
    old_map.write_text("old map")
    old_conf.write_text("old confidence")
    new_conf, new_map = tmp_path / ".n1", tmp_path / ".n2"
    new_conf.write_text("new confidence")
    new_map.write_text("new map")
    real = os.replace

    def fail_on_map(src, dst):
        if Path(dst) == old_map:
            raise OSError("disk full")
        real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", fail_on_map)
    with pytest.raises(OSError):
        atomic.publish_together([(new_conf, old_conf), (new_map, old_map)])
    assert not old_conf.exists() and not old_map.exists()  # no confidence map without its map
    monkeypatch.setattr(atomic.os, "replace", real)
    new_conf.write_text("new confidence")
    atomic.publish_together([(new_conf, old_conf), (new_map, old_map)])
    assert old_map.read_text() == "new map" and old_conf.read_text() == "new confidence"


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_outputs_follow_the_umask(mask, mode, stages, tmp_path):
    from lcflow.assess import accuracy_figures
    from lcflow.common import atomic, raster

    previous = os.umask(mask)
    try:
        atomic.write_text(tmp_path / "a.json", "{}")
        samples.write(pd.read_parquet(stages["samples2018"]).head(10), tmp_path / "s.parquet", {})
        raster.write_cog(tmp_path / "r.tif", np.zeros((8, 8), np.uint8),
                         raster.Grid.from_bounds(32631, (0, 0, 80, 80), 10))
        score = {"confusion_matrix": {"labels": [1, 2], "matrix": [[3, 1], [0, 4]]}, "overall_accuracy": 0.875,
                 "kappa": 0.75}
        accuracy_figures.confusion_figure(score, tmp_path / "f.png", "t")
    finally:
        os.umask(previous)
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == {"a.json": mode, "s.parquet": mode, "r.tif": mode, "f.png": mode}


def test_a_cancelled_cube_job_leaves_nothing(stages, tmp_path):
    """SIGTERM (scancel, Snakemake cancelling) unwinds: no cube, no staging directory."""
    import signal
    import subprocess
    import sys
    import time

    from lcflow.common.atomic import staging_prefix

    lcflow = Path(sys.executable).parent / "lcflow"
    proc = subprocess.Popen([str(lcflow), "cube", "--items", str(stages["items2018"]), "--tile", "31UFT", "--year",
                             "2018", "--bounds", ",".join(map(str, SMALL_AOI["31UFT"])), "--block-px", "16",
                             "--out", str(tmp_path / "cube.tif"), "--valid", str(tmp_path / "valid.tif")],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    staging = f"{staging_prefix(tmp_path / 'cube.tif')}*/stage.tif"
    while time.time() < deadline and not list(tmp_path.glob(staging)):
        time.sleep(0.05)
    assert list(tmp_path.glob(staging)), "the cube never started"
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == ("lcflow cube: error: stopped by SIGTERM (a cancelled job or its time "
                                            "limit): nothing was published"), err
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_in_training_says_so_in_one_line_and_leaves_no_empty_folder(stages, tmp_path):
    """SIGINT while a network trains, before its first checkpoint: one line (no traceback), exit 130, and
    the output folder the training made is gone again."""
    import signal
    import subprocess
    import sys
    import time

    lcflow = Path(sys.executable).parent / "lcflow"
    proc = subprocess.Popen([str(lcflow), "train", "--model", "lstm", "--samples", str(stages["samples2018"]), "--out",
                             str(tmp_path / "models" / "lstm"), "--set", "epochs=500", "--set", "threads=1"],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    said = []
    while time.time() < deadline:  # until the network starts its steps
        line = proc.stderr.readline()
        said.append(line)
        if not line or "schedule:" in line:
            break
    assert any("schedule:" in line for line in said), said
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    lines = [line for line in err.strip().splitlines() if not line[:4].isdigit()]  # all but the log's own lines
    assert proc.returncode == 128 + signal.SIGINT, err[-3000:]
    assert lines == ["lcflow train: stopped by SIGINT: nothing was published; run it again to finish"], err[-3000:]
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert left in ([], ["models", "models/lstm", "models/lstm/checkpoint.pt"]), left  # a checkpoint resumes


# -------------------------------------------------------------- data floors that warn, and what passes


def test_a_model_that_does_not_beat_the_majority_says_so(tmp_path, caplog):
    from lcflow.train import training

    rng = np.random.default_rng(3)
    n = 400
    frame = pd.DataFrame({"label": np.where(rng.random(n) < 0.8, 1, 2),
                          "split": np.where(np.arange(n) % 4 == 0, "val", "train")})
    for k in range(4):
        frame[f"B04_t{k:02d}"] = rng.normal(size=n)  # noise: nothing to learn
    samples.write(frame, tmp_path / "noise.parquet", {})
    with caplog.at_level("WARNING", logger="lcflow"):
        metrics = training.train("rf", [str(tmp_path / "noise.parquet")], tmp_path / "rf", {"n_estimators": 20})
    val = metrics["val"]
    assert not val["beats_majority"] and val["overall_accuracy"] <= val["majority_rate"]
    assert val["majority_rate"] == pytest.approx((frame.loc[frame["split"] == "val", "label"] == 1).mean())
    assert any("rf does not beat the majority class on val" in r.getMessage() for r in caplog.records)
    assert json.loads((tmp_path / "rf" / "metrics.json").read_text())["val"]["beats_majority"] is False


def test_rows_without_any_observation_are_left_out_with_a_warning(stages, tmp_path, caplog):
    from lcflow.train import training

    frame = pd.read_parquet(stages["samples2018"])
    bands = [c for c in frame.columns if "_t" in c]
    empty = frame.index[frame["split"] == "train"][:7]
    frame.loc[empty, bands] = np.nan
    frame.to_parquet(tmp_path / "t.parquet")
    with caplog.at_level("WARNING", logger="lcflow"):
        metrics = training.train("rf", [str(tmp_path / "t.parquet")], tmp_path / "rf", {"n_estimators": 10})
    assert metrics["n_train"] == int((frame["split"] == "train").sum()) - 7
    assert any("7 of" in r.getMessage() and "train rows have no observation at all" in r.getMessage()
               for r in caplog.records)


def test_rows_a_score_counts_as_wrong_are_said_with_their_number(stages, tmp_path, caplog):
    """Test rows without observation and rows of classes the model does not know count as wrong in a score:
    the log says how many, by class, for evaluate and for training's closing test score."""
    from lcflow.train import training
    from lcflow.train.model_dirs import saved_models

    frame = pd.read_parquet(stages["samples2018"])
    bands = [c for c in frame.columns if "_t" in c]
    test = frame.index[frame["split"] == "test"]
    frame.loc[test[:4], bands] = np.nan
    frame.loc[test[4:7], "label"] = 99
    frame.to_parquet(tmp_path / "t.parquet")
    with caplog.at_level("WARNING", logger="lcflow"):
        metrics = training.train("rf", [str(tmp_path / "t.parquet")], tmp_path / "rf", {"n_estimators": 10})
        result = saved_models.evaluate(tmp_path / "rf", [str(tmp_path / "t.parquet")], tmp_path / "m.json")
    said = [r.getMessage() for r in caplog.records]
    source = f"the test rows of {tmp_path}/t.parquet"
    for score in (metrics["test"], result):
        assert score["n_without_observation"] == 4 and score["n_unknown_class"] == 3
        # every test row is scored, and the 7 rows count as wrong: a score over the known rows only fails here
        assert score["n_samples"] == len(test) and score["overall_accuracy"] <= (len(test) - 7) / len(test)
    assert said.count(f"{source}: 4 of {len(test)} rows have no observation at all, and count as wrong") == 2, said
    assert said.count(f"{source}: 3 of {len(test)} rows are of classes the model does not know (99 (3 rows)), and "
                      "count as wrong") == 2, said


def test_corine_leaving_part_of_a_tile_unlabelled_is_said_before_any_job(demo, stages, tmp_path, caplog):
    """Labels from a CORINE raster that covers half a tile: the labels job and check-config warn with the
    share, and refuse it above labels.unlabelled_max."""
    from lcflow import config
    from lcflow.labels import alignment, nomenclature

    ctx = Ctx(tmp_path, demo, stages, None)
    half = corine_half(ctx)
    with caplog.at_level("WARNING", logger="lcflow"):
        alignment.run(half, stages["cube2018"], tmp_path / "labels.tif", nomenclature.clc_level(2))
    assert any(f"CORINE raster {half} gives no class to 56.0 % of the tile area" in r.getMessage() and
               "above labels.unlabelled_warn (25 %)" in r.getMessage() for r in caplog.records)
    cfg = copy.deepcopy(DEMO)
    cfg.pop("demo")
    cfg["tiles"], cfg["aoi"] = ["31UFT"], {"31UFT": SMALL_AOI["31UFT"]}
    cfg["stac"] = {"catalog": str(demo / "catalog" / "catalog.json")}
    cfg["labels"]["corine"] = half
    cfg.pop("assess", None)
    caplog.clear()
    with caplog.at_level("WARNING", logger="lcflow"):
        config.check(cfg, SCHEMA, base=tmp_path)
    assert any("gives no class to 5" in r.getMessage() and "% of the area of tile 31UFT" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    cfg["labels"]["unlabelled_max"] = 0.4
    with pytest.raises(LcflowError, match=r"config: labels.corine: CORINE raster .* gives no class to 5\d.\d % of the "
                                          r"area of tile 31UFT .*above labels.unlabelled_max \(40 %\)"):
        config.check(cfg, SCHEMA, base=tmp_path)


def test_a_number_yaml_reads_as_text_is_still_a_number():
    from lcflow.train.models import hyperparameters as params

    assert params.check("lstm", {"learning_rate": "1e-3"})["learning_rate"] == 0.001
    assert params.check("rf", {"max_features": 1})["max_features"] == 1  # one feature
    assert params.check("rf", {"max_features": 1.0})["max_features"] == 1.0  # all features
    assert params.check("rf", {"max_depth": None, "n_estimators": 300.0})["n_estimators"] == 300
    with pytest.raises(LcflowError, match=r"expected an integer in \[1, 10000\]"):
        params.check("rf", {"n_estimators": True})  # YAML's yes is not a count
