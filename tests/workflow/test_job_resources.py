"""The per-stage table of job resources, from Snakemake benchmark files written as Snakemake writes them."""

import json
import os

import numpy as np
import pandas as pd
import pytest

from lcflow import job_resources
from lcflow.common import rank_usage
from lcflow.errors import LcflowError

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def bench(path, wall, rss, cpu):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{wall:.4f}\t0:00:01\t{rss}\t1.0\t1.0\t1.0\t0.0\t0.0\t50.0\t{cpu}\n")


def test_stages_sum_their_jobs_and_keep_the_highest_peak(tmp_path):
    bench(tmp_path / "cube" / "31UFT_2018.tsv", 10.5, 800.25, 18.0)
    bench(tmp_path / "cube" / "31UFT_2019.tsv", 12.0, 950.5, 20.0)
    bench(tmp_path / "predict" / "31UFT_2018_rf.tsv", 3.0, "NA", "NA")  # too fast to be sampled
    bench(tmp_path / "synth.tsv", 7.0, 300.0, 6.5)
    out = tmp_path / "table.tsv"
    jobs = job_resources.write(tmp_path, out, tmp_path / "figure.png")
    assert len(jobs) == 4 and (tmp_path / "figure.png").stat().st_size > 1000
    table = pd.read_csv(out, sep="\t").set_index("stage")
    assert table.loc["cube"].to_dict() == {"jobs": 2, "wall_s_total": 22.5, "wall_s_max": 12.0, "cpu_s_total": 38.0,
                                           "max_rss_mb": 950.5, "ranks_measured": 0}
    assert table.loc["synth", "jobs"] == 1 and table.loc["synth", "wall_s_total"] == 7.0
    assert list(table.index) == ["synth", "cube", "predict"]  # in the order a run reaches them
    assert table.loc["predict", "wall_s_max"] == 3.0 and np.isnan(table.loc["predict", "max_rss_mb"])


def test_a_file_that_is_no_benchmark_is_named(tmp_path):
    (tmp_path / "cube").mkdir()
    (tmp_path / "cube" / "x.tsv").write_text("a\tb\n1\t2\n")
    with pytest.raises(LcflowError, match=r"cube/x.tsv: no s, cpu_time, max_rss"):
        job_resources.read(tmp_path)
    with pytest.raises(LcflowError, match="no benchmark files"):
        job_resources.read(tmp_path / "empty")


def test_a_multi_rank_job_counts_its_ranks_which_its_benchmark_does_not_see(tmp_path):
    """Under Slurm the benchmark measures srun (4.5 CPU s); the two ranks wrote their own usage on two
    nodes: the job's CPU is theirs, its memory the fuller node's. Where the benchmark saw more (a local
    launcher's ranks are its children), its figure stays."""
    srun = tmp_path / "train" / "lstm.tsv"
    bench(srun, 120.0, 90.0, 4.5)
    local = tmp_path / "train" / "tempcnn.tsv"
    bench(local, 60.0, 1200.0, 110.0)
    for path, cpus, wall in ((srun, (100.0, 95.0), 120.0), (local, (50.0, 52.0), 60.0)):
        end = path.stat().st_mtime
        os.utime(path, (end, end))
        ranks = path.with_suffix(".ranks")
        ranks.mkdir()
        for i, cpu in enumerate(cpus):
            (ranks / f"n{i}-{i}.json").write_text(json.dumps(
                {"command": "train", "rank": i, "host": f"n{i}", "pid": i, "started": end - wall + 5, "ended": end - 2,
                 "cpu_s": cpu, "max_rss_mb": 700.0 + i}))
    jobs = job_resources.read(tmp_path).set_index("job")
    assert jobs.loc["lstm", ["cpu_s", "max_rss_mb", "ranks"]].tolist() == [195.0, 701.0, 2]
    assert jobs.loc["tempcnn", ["cpu_s", "max_rss_mb", "ranks"]].tolist() == [110.0, 1200.0, 2]
    table = job_resources.by_stage(jobs.reset_index()).set_index("stage")
    assert table.loc["train", "cpu_s_total"] == 305.0 and table.loc["train", "ranks_measured"] == 4
    assert rank_usage.folder(srun) == str(tmp_path / "train" / "lstm.ranks")
