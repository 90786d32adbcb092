"""lcflow report: Snakemake's report written under a staging name, checked whole, then renamed; a full disk
or a report cut short leaves the earlier report as it was."""

import subprocess
import sys
from pathlib import Path

import pytest

from lcflow import report_file
from lcflow.cli import main

from ..conftest import tmpfs

SNAKEFILE = 'rule all:\n    output: "a.txt"\n    log: "a.log"\n    shell: "echo a > {output} 2> {log}"\n'


@pytest.fixture
def run_dir(tmp_path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "Snakefile").write_text(SNAKEFILE)
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    subprocess.run([snakemake, "-d", str(work), "-s", str(work / "Snakefile"), "--cores", "1"], check=True,
                   capture_output=True, timeout=300)
    return work


def _report(work: Path, out: Path) -> int:
    return main(["report", "--out", str(out), "--", "-d", str(work), "-s", str(work / "Snakefile")])


def test_a_report_is_published_whole(run_dir, tmp_path):
    out = tmp_path / "report.html"
    assert _report(run_dir, out) == 0
    assert report_file.why_incomplete(out) is None and out.stat().st_size > 10_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "work"]  # no staging left


def test_a_full_disk_leaves_the_earlier_report_as_it_was(run_dir, tmp_path, capsys):
    with tmpfs(tmp_path / "small", "64k") as small:
        old = small / "report.html"
        old.write_text("<html>the earlier report</html>\n")
        assert _report(run_dir, old) == 2
        lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("lcflow report: error:")]
        assert lines == [f"lcflow report: error: snakemake --report ended with exit 1 (its lines above); {old} is "
                         "left as it was"], lines
        assert old.read_text() == "<html>the earlier report</html>\n" and [p.name for p in small.iterdir()] == [
            "report.html"]


def test_a_report_cut_short_is_not_published(tmp_path, capsys):
    fake = tmp_path / "snakemake"
    fake.write_text('#!/bin/sh\nfor last; do :; done\nprintf "<html><body>half" > "$last"\n')
    fake.chmod(0o755)
    out = tmp_path / "report.html"
    with pytest.raises(Exception, match="the report Snakemake wrote is not whole: it ends before its document does"):
        report_file.run(out, [], program=str(fake))
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["snakemake"]
    zipped = tmp_path / "r.zip"
    zipped.write_bytes(b"PK\x03\x04 not a zip")
    assert "no whole zip archive" in report_file.why_incomplete(zipped)
