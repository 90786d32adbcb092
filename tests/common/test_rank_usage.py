"""Each rank's own CPU time and memory: written at exit where its launcher asks, read back beside the
job's benchmark file, an earlier run's files left out."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from lcflow.common import rank_usage

from ..conftest import ROOT

LCFLOW = Path(sys.executable).parent / "lcflow"


def test_a_command_writes_its_usage_where_its_launcher_asks(tmp_path):
    """The real command line, as a rank of a launcher sets it: one file a process, its CPU and peak."""
    where = tmp_path / "train" / "lstm.ranks"
    env = {**os.environ, rank_usage.VARIABLE: str(where), "OMPI_COMM_WORLD_RANK": "1"}
    started = time.time()
    done = subprocess.run([str(LCFLOW), "check-config", "--configfile", "config/config.yaml"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    [path] = where.glob("*.json")
    record = json.loads(path.read_text())
    assert record["command"] == "check-config" and record["rank"] == 1
    assert record["cpu_s"] > 0.2 and 20 < record["max_rss_mb"] < 4000  # imports at least; a Python's peak
    assert started - 1 <= record["started"] <= record["ended"] <= time.time() + 1
    # a failed command's CPU was spent too
    done = subprocess.run([str(LCFLOW), "check-config", "--configfile", str(tmp_path / "none.yaml")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and len(list(where.glob("*.json"))) == 2


def test_without_the_variable_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(rank_usage.VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    with rank_usage.recorded("x"):
        pass
    assert list(tmp_path.iterdir()) == []


def test_the_work_inside_the_block_is_counted(tmp_path, monkeypatch):
    monkeypatch.setenv(rank_usage.VARIABLE, str(tmp_path / "j.ranks"))
    before = rank_usage._now_usage()["cpu_s"]
    with rank_usage.recorded("spin"):
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "j.ranks").glob("*.json")]
    assert record["cpu_s"] - before >= 0.3


def rank(where: Path, host: str, pid: int, started: float, ended: float, cpu: float, rss: float) -> None:
    where.mkdir(parents=True, exist_ok=True)
    (where / f"{host}-{pid}.json").write_text(json.dumps(
        {"command": "train", "rank": pid, "host": host, "pid": pid, "started": started, "ended": ended,
         "cpu_s": cpu, "max_rss_mb": rss}))


def test_the_ranks_of_the_job_count_and_an_earlier_run_s_do_not(tmp_path):
    bench = tmp_path / "train" / "lstm.tsv"
    where = Path(rank_usage.folder(bench))
    assert where == tmp_path / "train" / "lstm.ranks"
    end = 1_000_000.0
    rank(where, "n1", 1, end - 95, end - 1, 90.0, 500.0)
    rank(where, "n1", 2, end - 95, end - 1, 80.0, 400.0)
    rank(where, "n2", 3, end - 95, end - 1, 85.0, 600.0)
    rank(where, "n2", 4, end - 900, end - 800, 70.0, 9000.0)  # a run before: its time is not the job's
    (where / "n3-5.json").write_text('{"cpu_s": ')  # a rank killed while it wrote
    records = rank_usage.read(bench, end, 100.0)
    assert sorted(r["pid"] for r in records) == [1, 2, 3]
    assert rank_usage.summed(records) == {"cpu_s": 255.0, "max_rss_mb": 900.0, "ranks": 3, "nodes": 2}
    assert rank_usage.read(tmp_path / "train" / "other.tsv", end, 100.0) == []
