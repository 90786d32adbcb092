"""config/netherlands.yaml, the seed study's set-up, plans as it should under the Slurm profile."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from ..conftest import ROOT, snakemake
from ..corine_cover import corine_over


def test_netherlands_config_plans_whole_tiles_from_earth_search(tmp_path):
    config = ROOT / "config" / "netherlands.yaml"
    cfg = yaml.safe_load(config.read_text())
    assert cfg["tiles"] == ["31UFT", "31UGS", "32ULC", "31UGU", "31UGV", "31UFV", "31UFU", "31UFS", "31UES", "31UET"]
    assert cfg["years"] == [2018, 2019, 2020] and "aoi" not in cfg and "demo" not in cfg
    corine_over(cfg["tiles"], tmp_path / cfg["labels"]["corine"])
    shutil.copy(config, tmp_path / "netherlands.yaml")
    done = snakemake(tmp_path, "-n", profile="slurm", configfile=tmp_path / "netherlands.yaml", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    out = done.stdout + done.stderr
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.MULTILINE))
    tile_years = 10 * 3
    assert {k: int(counts[k]) for k in ("search", "cube", "sample", "labels", "train", "train_rf", "predict",
                                        "predict_rf")} == \
        {"search": tile_years, "cube": tile_years, "sample": tile_years, "labels": 10, "train": 1, "train_rf": 1,
         "predict": tile_years, "predict_rf": tile_years}
    # lcflow budget plans the same jobs, stage by stage
    from lcflow.budget.projection import rule

    env = {k: v for k, v in os.environ.items() if not k.startswith("LCFLOW_SLURM_")}
    subprocess.run([str(Path(sys.executable).parent / "lcflow"), "budget", "--configfile", str(config), "--json",
                    str(tmp_path / "budget.json")], cwd=ROOT, env=env, check=True, capture_output=True, timeout=120)
    budgeted: dict[str, int] = {}
    for row in json.loads((tmp_path / "budget.json").read_text())["rows"]:
        budgeted[rule(row["stage"])] = budgeted.get(rule(row["stage"]), 0) + row["jobs"]
    assert budgeted == {r: int(counts[r]) for r in budgeted}
    # a deep model's map is a multi-rank MPI job on the GPU nodes, one rank a GPU; the forest's a CPU job
    deep = re.findall(r"^Shell command: env LCFLOW_RANK_USAGE=\S+ (srun --mpi=pmix [^\n]*?) lcflow -v predict ", out, re.MULTILINE)
    assert len(deep) == tile_years
    assert set(deep) == {"srun --mpi=pmix --kill-on-bad-exit=1 --nodes=1 --ntasks-per-node=4 --cpus-per-task=12"}
    predict_jobs = re.findall(r"rule predict:.*?resources: ([^\n]*)", out, re.DOTALL)
    assert predict_jobs and all("mpi=srun --mpi=pmix" in r and "gres=gpu:4" in r and "slurm_partition=booster" in r
                                for r in predict_jobs)
    forest_jobs = re.findall(r"rule predict_rf:.*?resources: ([^\n]*)", out, re.DOTALL)
    assert forest_jobs and not any("mpi=" in r or "gres=" in r for r in forest_jobs)
    # and time for a forest of a million rows (benchmarks/seed_study.py: about 10 min a tile-year on 8 cores)
    assert all("runtime=120" in r and "cpus_per_task=8" in r and "mem_mb=8000" in r for r in forest_jobs), forest_jobs[:1]
    # the forest's training, which every forest map waits for, takes a whole 48-core node
    training = re.findall(r"rule train_rf:.*?resources: ([^\n]*)", out, re.DOTALL)
    assert len(training) == 1 and "cpus_per_task=48" in training[0], training
    searches = re.findall(r"lcflow -v search .*", out)
    assert len(searches) == tile_years
    assert all("--api https://earth-search.aws.element84.com/v1" in s and "--max-cloud-cover 80" in s for s in searches)
    cubes = re.findall(r"lcflow -v cube .*", out)
    assert len(cubes) == tile_years
    assert all("--bounds" not in c and "--signing none" in c for c in cubes)  # whole tiles
    settings = {json.dumps(json.loads(shlex.split(c)[shlex.split(c).index("--settings") + 1])) for c in cubes}
    assert len(settings) == 1 and json.loads(settings.pop())["read_threads"] == 8  # the config's cube section
    # the profile gives a whole tile-year's cube room and time
    cube_jobs = re.findall(r"rule cube:.*?resources: ([^\n]*)", out, re.DOTALL)
    assert cube_jobs and all("runtime=240" in r and "cpus_per_task=8" in r and "mem_mb=12000" in r for r in cube_jobs)
