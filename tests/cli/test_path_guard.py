"""The guard every command passes through: no output may be, or lie inside, one of its inputs."""

import argparse
import os

import pytest

from lcflow.common import path_guard
from lcflow.common.path_guard import INPUT_DIR, INPUT_FILE, OUTPUT_DIR, OUTPUT_FILE, Named, Role
from lcflow.errors import LcflowError


def refused(*paths: Named) -> str:
    with pytest.raises(LcflowError) as caught:
        path_guard.check(paths)
    return str(caught.value)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "t.parquet").write_text("table")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.json").write_text("{}")
    return tmp_path


def test_an_output_that_is_an_input_is_refused_naming_both(files):
    said = refused(Named("--samples", str(files / "t.parquet"), INPUT_FILE),
                   Named("--out", str(files / "t.parquet"), OUTPUT_FILE))
    assert said == (f"--out {files}/t.parquet is the input --samples {files}/t.parquet: writing it would destroy the "
                    "input; name another file")


def test_links_and_relative_spellings_are_the_same_file(files, monkeypatch):
    (files / "soft.parquet").symlink_to(files / "t.parquet")
    os.link(files / "t.parquet", files / "hard.parquet")
    monkeypatch.chdir(files / "model")
    table = Named("--samples", "../t.parquet", INPUT_FILE)
    for spelling in ("../soft.parquet", str(files / "hard.parquet"), f"{files}/model/../t.parquet"):
        assert "is the input --samples ../t.parquet" in refused(table, Named("--out", spelling, OUTPUT_FILE))


def test_a_linked_folder_leads_to_the_same_places(files):
    """Links followed for what does not exist yet too: an output under a link to the input directory lies
    inside it, and two new outputs spelled through a linked folder and its target are one file (the
    inode check sees neither: the files are not there)."""
    (files / "via").symlink_to(files / "model")
    model = Named("--model-dir", str(files / "model"), INPUT_DIR)
    said = refused(model, Named("--out", str(files / "via" / "metrics.json"), OUTPUT_FILE))
    assert said.startswith(f"--out {files}/via/metrics.json lies inside the input directory --model-dir {files}/model")
    said = refused(Named("--model-dir", str(files / "via"), INPUT_DIR),
                   Named("--out", str(files / "model" / "new.json"), OUTPUT_FILE))
    assert said.startswith(f"--out {files}/model/new.json lies inside the input directory --model-dir {files}/via")
    (files / "out").mkdir()
    (files / "linked_out").symlink_to(files / "out")
    said = refused(Named("--out", str(files / "out" / "map.tif"), OUTPUT_FILE),
                   Named("--confidence", str(files / "linked_out" / "map.tif"), OUTPUT_FILE))
    assert "map.tif" in said and not (files / "out" / "map.tif").exists()


def test_outputs_inside_an_input_directory_are_refused(files):
    model = Named("--model-dir", str(files / "model"), INPUT_DIR)
    for inside in ("model.json", "new.json", "sub/deeper.png"):
        said = refused(model, Named("--timing", str(files / "model" / inside), OUTPUT_FILE))
        assert said.startswith(f"--timing {files}/model/{inside} lies inside the input directory --model-dir")
    path_guard.check([model, Named("--out", str(files / "beside.json"), OUTPUT_FILE)])  # beside it is fine


def test_a_directory_that_names_what_it_reads_keeps_room_for_outputs(files):
    study = Named("--study", str(files / "study"), Role(output=False, directory=True, reads=("journal.log", "beats")))
    path_guard.check([study, Named("--out", str(files / "study" / "best.yaml"), OUTPUT_FILE)])
    assert "is journal.log of the input --study" in refused(study, Named("--out", str(files / "study" / "journal.log"),
                                                                         OUTPUT_FILE))
    assert "is beats of the input --study" in refused(study, Named("--out", str(files / "study" / "beats" / "1"),
                                                                   OUTPUT_FILE))


def test_inputs_inside_an_output_directory_and_shared_outputs_are_refused(files):
    assert "lies inside the output directory --out" in refused(
        Named("--samples", str(files / "model" / "model.json"), INPUT_FILE),
        Named("--out", str(files / "model"), OUTPUT_DIR))
    assert refused(Named("--out", str(files / "a.tif"), OUTPUT_FILE),
                   Named("--valid", str(files / "a.tif"), OUTPUT_FILE)).startswith("--out and --valid name the same file")


def test_outputs_of_the_wrong_kind_are_refused(files):
    assert "is a file, not a directory" in refused(Named("--out", str(files / "t.parquet"), OUTPUT_DIR))
    assert "is a directory, not a file" in refused(Named("--out", str(files / "model"), OUTPUT_FILE))


def test_remote_locations_are_not_local_files(files):
    path_guard.check([Named("--catalog", "https://host/catalog.json", INPUT_FILE),
                      Named("--out", str(files / "items.json"), OUTPUT_FILE),
                      Named("--cube", "/vsis3/bucket/cube.tif", INPUT_FILE)])


def test_declared_reads_the_roles_from_the_parser_and_the_command_s_implied_paths(files):
    p = argparse.ArgumentParser()
    p.add_argument("--samples", nargs="+", type=path_guard.input_file)
    p.add_argument("--out", type=path_guard.output_file)
    p.add_argument("--title")
    p.set_defaults(implied_paths=lambda a: [Named("--out's table", a.out + ".csv", OUTPUT_FILE)])
    args = p.parse_args(["--samples", "a", "b", "--out", "o", "--title", "t"])
    assert path_guard.declared(p, args) == [Named("--samples", "a", INPUT_FILE), Named("--samples", "b", INPUT_FILE),
                                           Named("--out", "o", OUTPUT_FILE), Named("--out's table", "o.csv", OUTPUT_FILE)]


#: every path option of every command, by role: the table a new path option joins
ROLES = {
    "synth": {"--out": "output directory"},
    "synth-scenes": {},  # its tile-year's catalogue and truth, named by implied_paths
    "synth-corine": {},
    "synth-catalog": {"--children": "input file"},
    "label-reference": {"--points": "input file", "--truth": "input file", "--mapping": "input file",
                        "--out": "output file"},
    "search": {"--catalog": "input file", "--out": "output file"},
    # --dir is the folder every tile-year's stage-in writes into at once: no one command's output to lock
    "stage": {"--items": "input file", "--out": "output file"},
    "cube": {"--items": "input file", "--out": "output file", "--valid": "output file"},
    "labels": {"--corine": "input file", "--reference": "input file", "--change": "input file", "--grid": "input file",
               "--mapping": "input file", "--out": "output file"},
    "sample": {"--cube": "input file", "--valid": "input file", "--labels": "input file", "--reference-cube": "input file",
               "--out": "output file"},
    "train": {"--samples": "input file", "--out": "output directory", "--tuned": "input file"},
    "blend": {"--members": "input directory", "--samples": "input file", "--out": "output directory"},
    "evaluate": {"--model-dir": "input directory", "--samples": "input file", "--out": "output file"},
    "learning-curve": {"--history": "input file", "--out": "output file"},
    "tune": {"--samples": "input file", "--study": "input directory", "--space": "input file", "--out": "output file"},
    "tune-summary": {"--study": "input directory", "--out": "output file"},
    "predict": {"--model-dir": "input directory", "--cube": "input file", "--out": "output file",
                "--confidence": "output file", "--probabilities": "output file", "--timing": "output file"},
    "blend-maps": {"--model-dir": "input directory", "--member-probabilities": "input file", "--out": "output file",
                   "--confidence": "output file", "--probabilities": "output file", "--member-timings": "input file",
                   "--timing": "output file"},
    "consistent-maps": {"--probabilities": "input file", "--out": "output file", "--confidence": "output file",
                        "--changes": "output file", "--summary": "output file", "--truth": "input file",
                        "--mapping": "input file"},
    "quicklook": {"--map": "input file", "--confidence": "input file", "--out": "output file"},
    "change-figure": {"--change": "input file", "--summary": "input file", "--out": "output file"},
    "summarize-changes": {"--summaries": "input file", "--out": "output file"},
    "stac-item": {"--map": "input file", "--confidence": "input file", "--model-dir": "input directory",
                  "--manifest": "input file", "--assessment": "input file", "--quicklook": "input file",
                  "--change": "input file", "--summary": "input file", "--out": "output file"},
    "stac-catalog": {"--items": "input file", "--out": "output file"},
    "design-sample": {"--map": "input file", "--out": "output file", "--csv": "output file"},
    "assess": {"--model-dir": "input directory", "--samples": "input file", "--map": "input file",
               "--reference": "input file", "--truth": "input file", "--mapping": "input file",
               "--figure": "output file", "--areas-figure": "output file", "--out": "output file"},
    "summarize": {"--assessments": "input file", "--out": "output file"},
    "compare-models": {"--assessments": "input file", "--models": "input directory", "--timings": "input file",
                       "--out": "output file", "--figure": "output file"},
    "job-resources": {"--benchmarks": "input directory", "--out": "output file", "--figure": "output file"},
    "report": {"--out": "output file"},
    "check-config": {"--configfile": "input file"},
    "budget": {"--configfile": "input file", "--rates": "input file", "--rates-from": "input directory", "--json": "output file"},
}


def test_every_command_declares_the_role_of_each_path_it_takes():
    from lcflow.cli import parser

    commands = parser().parse_args(["check-config"]).commands
    declared = {name: {a.option_strings[-1]: a.type.role.what for a in p._actions if hasattr(a.type, "role")}
                for name, p in commands.items()}
    assert declared == ROLES
