"""lcflow budget: the cluster from the profile, the rates' two parts, the pruner's share, the jobs a config
makes as Snakemake plans them, and the seed study's figures as benchmarks/seed_study.py printed them."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lcflow.budget import cluster, projection, rates
from lcflow.budget.pruning import share_run
from lcflow.errors import LcflowError

from ..conftest import ROOT, job_counts, snakemake

LCFLOW = Path(sys.executable).parent / "lcflow"


def budget(*args: str, cwd: Path = ROOT, **site: str) -> subprocess.CompletedProcess:
    """lcflow budget ARGS with the profile's ``site`` values (LCFLOW_SLURM_NAME) alone, none of this shell's."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("LCFLOW_SLURM_")},
           **{f"LCFLOW_SLURM_{k}": v for k, v in site.items()}}
    return subprocess.run([str(LCFLOW), "budget", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_cluster_is_the_profile_s_site_values_or_their_overrides(monkeypatch):
    for name in ("NODE_CORES", "CPU_CORES", "GPUS_PER_NODE", "TRAIN_NODES"):
        monkeypatch.delenv(f"LCFLOW_SLURM_{name}", raising=False)
    c = cluster.from_profile(ROOT / "profiles" / "slurm", 8, 4)
    assert (c.node_cores, c.cpu_job_cores, c.gpus_per_node, c.ranks_per_node, c.cores_per_rank, c.train_nodes,
            c.predict_nodes) == (48, 8, 4, 4, 12, 2, 1)
    monkeypatch.setenv("LCFLOW_SLURM_CPU_CORES", "16")
    monkeypatch.setenv("LCFLOW_SLURM_GPUS_PER_NODE", "0")
    c = cluster.from_profile(ROOT / "profiles" / "slurm", 8, 4)
    assert (c.cpu_job_cores, c.gpus_per_node, c.slots(16)) == (16, 0, 8 * 3)
    monkeypatch.setenv("LCFLOW_SLURM_NODE_CORES", "lots")
    with pytest.raises(LcflowError, match=r"profiles/slurm: site value NODE_CORES='lots' .*: not a whole number in \[1, 4096\]"):
        cluster.from_profile(ROOT / "profiles" / "slurm", 8, 4)


def test_a_stage_s_fixed_part_comes_from_small_jobs_and_its_rate_from_a_large_one():
    # 4 demo jobs spent 20 CPU s on 1e6 units; a large job measured 2e-6 CPU s a unit: 2 s of the 20 are
    # per unit, the rest (18 s over 4 jobs) fixed
    assert rates.affine(20.0, 4, 1e6, 0.5, 2e-6) == pytest.approx({"fixed_cpu_s": 4.5, "cpu_s_per_unit": 2e-6})
    # never under a process's start-up, even where the large job's rate explains everything
    assert rates.affine(1.0, 4, 1e6, 0.5, 2e-6)["fixed_cpu_s"] == 0.5
    # without a large job: the start-up fixed, the rest per unit
    assert rates.affine(20.0, 4, 1e6, 0.5) == pytest.approx({"fixed_cpu_s": 0.5, "cpu_s_per_unit": 18e-6})


def test_the_nearest_forest_is_scaled_to_the_rows_asked():
    r = {"forests": [{"rows": 1000, "leaf": 1, "fit_cpu_s_per_tree": 1.0, "map_cpu_s_per_px_300_trees": 1e-5},
                     {"rows": 1_000_000, "leaf": 30, "fit_cpu_s_per_tree": 20.0, "map_cpu_s_per_px_300_trees": 4e-5}]}
    at = rates.forest(r, 2_000_000, 30)
    assert at["rows"] == 1_000_000
    assert at["fit_cpu_s_per_tree_here"] == pytest.approx(20.0 * 2 * 20.9316 / 19.9316, rel=1e-4)  # n log n
    assert rates.forest(r, 2000, 1)["rows"] == 1000
    assert rates.forest(r, 2000, 7)["rows"] == 1000  # no forest of that leaf: the nearest in rows


def test_the_pruner_s_share_is_optuna_s_on_replayed_trials():
    assert share_run("none", 4, 40, 3, 20) == 1.0
    assert share_run("successive_halving", 4, 4, 3, 20) == 1.0  # nothing to prune before the first rung
    few, many = share_run("successive_halving", 4, 40, 3, 4), share_run("successive_halving", 4, 40, 3, 40)
    # the first trials have no peers to lose to and run whole; many trials approach halving's asymptote
    # (1 + 2/3 + 2/3 + 1/27) x 4 / 40 = 0.237
    assert 0.237 < many < few < 1.0
    assert many == pytest.approx(0.25, abs=0.04)


def test_a_profile_without_a_config_and_a_rates_file_without_its_parts_are_refused(tmp_path):
    done = budget("--configfile", "config/config.yaml", "--profile", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"lcflow budget: error: --profile {tmp_path}: no config.yaml there (the Slurm "
                                   "profile is profiles/slurm of lcflow's repository)")
    (tmp_path / "rates.json").write_text(json.dumps({"jobs": {}}))
    done = budget("--configfile", "config/config.yaml", "--rates", str(tmp_path / "rates.json"))
    assert done.returncode == 2 and "no assumed, deep_cpu, forests; benchmarks/seed_study.py --rates" in done.stderr


@pytest.mark.parametrize("option, value, said", [
    ("--cpu-nodes", "0", "argument --cpu-nodes: 0 is outside [1, 100000]"),
    ("--cpu-nodes", "-5", "argument --cpu-nodes: -5 is outside [1, 100000]"),
    ("--gpu-nodes", "0", "argument --gpu-nodes: 0 is outside [1, 100000]"),
    ("--stage-gbit", "-1", "argument --stage-gbit: -1 is outside (0, 10000]"),
    ("--scaling", "nan", "argument --scaling: nan is outside (0, 1]"),
    ("--scenes", "inf", "argument --scenes: inf is outside (0, 100000]"),
    ("--classes", "0", "argument --classes: 0 is outside [2, 1000]"),
    ("--classes", "2.5", "argument --classes: '2.5' is not a whole number"),
])
def test_a_budget_option_out_of_its_range_is_refused_in_one_line(option, value, said):
    done = budget("--configfile", "config/config.yaml", option, value)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1] == f"lcflow budget: error: {said} (see lcflow budget --help)", \
        done.stderr


@pytest.mark.parametrize("where, value", [("assumed.stage_gbit", 0), ("assumed.scaling", float("nan")),
                                          ("jobs.cube.cpu_s_per_unit", -1.0), ("forests[0].rows", 0)])
def test_a_rates_file_with_a_rate_no_budget_can_use_is_refused_naming_it(where, value, tmp_path):
    data = json.loads(rates.RATES.read_text())
    node, *keys = where.replace("[0]", ".0").split(".")
    target = data[node]
    for key in keys[:-1]:
        target = target[int(key)] if key.isdigit() else target[key]
    target[keys[-1]] = value
    (tmp_path / "rates.json").write_text(json.dumps(data))
    with pytest.raises(LcflowError, match=rf"rates .*: {re.escape(where)} = {re.escape(repr(value))} is not a finite"):
        rates.load(tmp_path / "rates.json")


def test_the_consistent_maps_jobs_that_start_together_each_compile_the_kernels(tmp_path):
    """The demo's 6 consistent_maps jobs run 2 at once here (profiles/local, one core each): the first 2
    compile the numba kernels, the rest find them cached; without the compile's figure, no job pays it."""
    measured = json.loads((ROOT / "workflow" / "lcflow" / "budget" / "rates.json").read_text())
    assert measured["jobs"]["consistent_maps"]["compile_cpu_s"] > 1.0  # consistent_maps_speed.py --cold
    cpu = {}
    for name, compile_s in (("none", None), ("ten", 10.0)):
        given = json.loads(json.dumps(measured))
        given["jobs"]["consistent_maps"].pop("compile_cpu_s")
        if compile_s:
            given["jobs"]["consistent_maps"]["compile_cpu_s"] = compile_s
        (tmp_path / f"{name}.json").write_text(json.dumps(given))
        done = budget("--configfile", "config/config.yaml", "--profile", "local", "--rates", str(tmp_path / f"{name}.json"),
                      "--json", str(tmp_path / f"b_{name}.json"))
        assert done.returncode == 0, done.stderr
        cpu[name] = _rows(tmp_path / f"b_{name}.json")["consistent_maps"]
    assert (cpu["ten"]["jobs"], cpu["ten"]["at_once"]) == (6, 2)
    assert cpu["ten"]["cpu_s"] - cpu["none"]["cpu_s"] == pytest.approx(2 * 10.0)
    assert "the first 2 job(s) compile the kernels" in cpu["ten"]["source"]
    assert "job(s) compile the kernels" not in cpu["none"]["source"]


def test_a_config_s_spectral_indices_are_layers_of_its_cubes_and_samples(tmp_path):
    """cube.indices add a layer each to every time step: the cubes' and the samples' disk grows with them."""
    over = tmp_path / "indices.yaml"
    over.write_text("cube:\n  indices: [NDVI, NDWI]\n")
    disk = {}
    for name, files in (("plain", ["config/config.yaml"]), ("indices", ["config/config.yaml", str(over)])):
        done = budget("--configfile", *files, "--profile", "local", "--json", str(tmp_path / f"{name}.json"))
        assert done.returncode == 0, done.stderr
        disk[name] = {stage: r["disk_gb"] for stage, r in _rows(tmp_path / f"{name}.json").items()}
    bands = len(yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["cube"]["bands"])
    # the cube holds 2 bytes a layer and a valid-count byte a step
    assert disk["indices"]["cube"] / disk["plain"]["cube"] == pytest.approx((2 * (bands + 2) + 1) / (2 * bands + 1))
    assert disk["indices"]["sample"] > disk["plain"]["sample"]


def _rows(path: Path) -> dict[str, dict]:
    return {r["stage"]: r for r in json.loads(path.read_text())["rows"]}


def test_the_seed_study_s_budget_is_the_one_its_benchmark_printed(tmp_path):
    """lcflow budget on config/netherlands.yaml, before any file of it exists, from the rates that
    benchmarks/seed_study.py wrote in the run that printed benchmarks/measured/seed_study_2core.txt."""
    done = budget("--configfile", "config/netherlands.yaml", "--json", str(tmp_path / "b.json"))
    assert done.returncode == 0, done.stderr
    printed = (ROOT / "benchmarks" / "measured" / "seed_study_2core.txt").read_text()
    # the table's rows, fixed width (the stage in 22), up to the blank line before the jobs and storage lines
    lines = printed.split("\nstage ", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    table = {line[:22].strip(): line[22:].split()[:7] for line in lines if line[:22].strip()
             and not line.startswith("(")}
    table["total"] = table["total"][:4]
    rows = _rows(tmp_path / "b.json")
    assert set(rows) == {k for k in table if k != "total"}
    for stage, row in rows.items():
        jobs, _, at_once, wall_h, core_h, gpu_h, disk_gb = table[stage]
        assert (int(jobs), int(at_once)) == (row["jobs"], row["at_once"]), stage
        for said, value in ((wall_h, row["wall_h"]), (core_h, row["core_h"]), (gpu_h, row["gpu_h"]),
                            (disk_gb, row["disk_gb"])):
            assert float(said) == pytest.approx(value, rel=0.01, abs=1e-3), stage
    total = json.loads((tmp_path / "b.json").read_text())
    wall, core, gpu = (float(v) for v in table["total"][:3])
    assert (wall, core, gpu) == (pytest.approx(total["critical_path_h"], rel=0.01),
                                 pytest.approx(total["core_h"], rel=0.01), pytest.approx(total["gpu_h"], rel=0.01))
    assert f"{total['core_h']:.1f}" in done.stdout and "critical path: search > stage-in > cube" in done.stdout
    # its Slurm jobs and the login node's (search, stage-in, the local rules), the staged files (a band a file)
    [jobs] = [line for line in printed.splitlines() if line.startswith("jobs: ")]
    assert jobs in done.stdout and jobs.startswith("jobs: 242 Slurm jobs (211 CPU, 31 GPU); 161 on the login node")
    spread = total["footprint"]
    assert spread["stage_files"] == 30 * 150 * 11 and spread["login_jobs"]["search"] == 30
    assert spread["slurm_jobs"] + sum(spread["login_jobs"].values()) == sum(r["jobs"] for r in rows.values())
    assert all(rows[stage]["core_h"] == 0 for stage in spread["login_jobs"])  # the login node bills nothing


@pytest.mark.parametrize("profile", ["local", "profiles/slurm"])
def test_the_budget_counts_the_jobs_snakemake_plans(tmp_path, profile):
    """Every stage's jobs, for the demo, as many as Snakemake's dry run of the same config plans."""
    done = budget("--configfile", "config/config.yaml", "--profile", profile, "--results", str(tmp_path / "none"),
                  "--json", str(tmp_path / "b.json"))
    assert done.returncode == 0, done.stderr
    planned = job_counts(snakemake(tmp_path, "-n", configfile=ROOT / "config" / "config.yaml", timeout=300).stdout)
    counted: dict[str, int] = {}
    for stage, row in _rows(tmp_path / "b.json").items():
        counted[projection.rule(stage)] = counted.get(projection.rule(stage), 0) + row["jobs"]
    assert counted == {rule: planned[rule] for rule in counted}
    assert {"search", "stage", "cube", "labels", "sample", "hpo", "hpo_rf", "train", "train_rf", "predict",
            "predict_rf", "consistent_maps", "assess"} <= set(counted)


def test_the_forest_s_memory_figures_reproduce_the_fits_they_were_fitted_to():
    """rates.json's forest_memory is benchmarks/forest_fit_memory.py's least squares over its measured fits:
    each fit's peak, as the budget models it, within 10 % of the peak measured."""
    m = rates.load()["forest_memory"]
    fits = json.loads((ROOT / "benchmarks" / "measured" / "forest_fit_memory_2core.json").read_text())["fits"]
    assert len(fits) >= 8 and {f["jobs"] for f in fits} == set(m["threads_measured"])
    for f in fits:
        modelled = (f["before_mb"] + m["fixed_mb"] + m["per_held_byte"] * f["held_mb"]
                    + (m["bytes_per_row"] + m["bytes_per_row_thread"] * f["jobs"]) * f["rows"] / 1e6)
        assert modelled == pytest.approx(f["peak_mb"], rel=0.1), f


def test_a_forest_fit_needing_more_than_a_node_holds_is_warned_about(tmp_path):
    """The seed study's forest training on a whole node: its peak memory, its buffers growing with the node's
    cores, and a WARNING naming NODE_MEM_MB where a node holds less (none where it holds more)."""
    def run(**site: str) -> tuple[str, dict]:
        done, _ = _site_budget(tmp_path, **site)
        assert done.returncode == 0, done.stderr
        return done.stdout, json.loads(_last_json(tmp_path).read_text())["memory_mb"]

    said, mb = run()
    assert "WARNING" not in said and set(mb) == {"train rf", "predict rf"}  # netherlands.yaml runs no forest study
    assert mb["train rf"] > mb["predict rf"] > 1000
    m, rows = rates.load()["forest_memory"], int(re.search(r"([\d,]+) training rows", said)[1].replace(",", ""))
    _, doubled = run(NODE_CORES="96")
    assert doubled["train rf"] - mb["train rf"] == pytest.approx(m["bytes_per_row_thread"] * rows * 48 / 1e6)
    small, _ = run(NODE_MEM_MB=str(int(mb["train rf"] // 2)))
    (warning,) = [line for line in small.splitlines() if line.startswith("WARNING")]
    assert f"train rf needs about {mb['train rf'] / 1000:.1f} GB" in warning and "(NODE_MEM_MB)" in warning
    assert "predict rf" not in warning


def _site_budget(tmp_path: Path, *args: str, **site: str) -> tuple[subprocess.CompletedProcess, dict]:
    """lcflow budget of config/netherlands.yaml on the profile with ``site`` values; its output and rows (its
    JSON: :func:`_last_json`)."""
    out = tmp_path / f"{len(list(tmp_path.glob('*.json')))}.json"
    done = budget("--configfile", "config/netherlands.yaml", "--json", str(out), *args, **site)
    return done, (_rows(out) if done.returncode == 0 else {})


def _last_json(tmp_path: Path) -> Path:
    return tmp_path / f"{len(list(tmp_path.glob('*.json'))) - 1}.json"


def test_a_gpu_type_never_measured_is_refused_or_scaled_by_a_stated_ratio(tmp_path):
    measured = rates.load()["gpu"]["device"]
    done, _ = _site_budget(tmp_path, GPU_TYPE="a100")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"site value GPU_TYPE='a100': the rates measure an {measured} alone; give --gpu-speed" in done.stderr
    _, plain = _site_budget(tmp_path)
    same, typed = _site_budget(tmp_path, GPU_TYPE="h100")  # the type measured: its figures as they are
    assert same.returncode == 0 and typed == plain
    slower, half = _site_budget(tmp_path, "--gpu-speed", "0.5", GPU_TYPE="a100")
    assert slower.returncode == 0, slower.stderr
    startup = rates.load()["startup_cpu_s"]
    for stage in ("train lstm", "predict lstm"):
        assert f"a100 taken as 0.5 x the measured {measured} (--gpu-speed)" in half[stage]["source"]
        assert half[stage]["job_s"] - startup == pytest.approx(2 * (plain[stage]["job_s"] - startup)), stage
    assert half["cube"] == plain["cube"]


def test_with_node_billing_core_hours_are_whole_nodes_x_their_cores_x_wall(tmp_path):
    profile = cluster.from_profile(ROOT / "profiles" / "slurm", 8, 4)
    _, by_core = _site_budget(tmp_path)
    done, by_node = _site_budget(tmp_path, BILLING="node")
    assert done.returncode == 0 and "whole nodes x their cores x wall (BILLING node)" in done.stdout
    assert set(by_node) == set(by_core)
    for stage, row in by_node.items():
        held = by_core[stage]["cores"]
        node = profile.gpu_node_cores if row["gpus"] else profile.node_cores
        nodes = -(-held // node)
        assert row["cores"] == nodes * node, stage
        assert row["core_h"] == pytest.approx(row["jobs"] * nodes * node * row["job_s"] / 3600), stage
        assert row["job_s"] == by_core[stage]["job_s"] and row["gpu_h"] == by_core[stage]["gpu_h"]
    assert by_node["cube"]["core_h"] == pytest.approx(by_core["cube"]["core_h"] * 48 / 8)
    done, _ = _site_budget(tmp_path, BILLING="nodes")
    assert done.returncode == 2 and "site value BILLING='nodes'" in done.stderr and "one of core, node" in done.stderr


def _bench(path: Path, wall: float, cpu: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
                    f"{wall}\t0:00:01\t100\t1\t1\t1\t0\t0\t50\t{cpu}\n")


def _small_run(results: Path, maps: bool) -> None:
    """A finished run's results folder: one tile-year's cube of 10 x 20 px and 3 scenes, an lstm trained on
    two A100s, and (``maps``) its map."""
    import numpy as np
    import rasterio
    from rasterio.transform import from_origin

    ty = results / "31UFT" / "2018"
    ty.mkdir(parents=True)
    with rasterio.open(ty / "cube.tif", "w", driver="GTiff", width=10, height=20, count=1, dtype="uint8",
                       crs="EPSG:32631", transform=from_origin(600000, 5800000, 10, 10)) as ds:
        ds.write(np.zeros((1, 20, 10), "uint8"))
    (ty / "items.json").write_text(json.dumps({"features": [{}, {}, {}]}))
    _bench(results / "benchmarks" / "cube" / "31UFT_2018.tsv", 8.0, 10.0)
    _bench(results / "benchmarks" / "train" / "lstm.tsv", 100.0, 30.0)
    if maps:
        _bench(results / "benchmarks" / "predict" / "31UFT_2018_lstm.tsv", 11.0, 9.0)
    (results / "models" / "lstm").mkdir(parents=True)
    (results / "models" / "lstm" / "metrics.json").write_text(json.dumps(
        {"params": {"epochs": 2, "batch_size": 64, "min_steps": 0}, "n_train": 1000, "world_size": 2,
         "device": "NVIDIA A100-SXM4-40GB"}))


def test_rates_from_a_run_price_its_stages_as_its_jobs_spent_them(tmp_path):
    """--rates-from: the cube from its job over pixels x scenes; a training on GPUs as samples a second a
    GPU over its wall time, its map as pixels a second a GPU; the rest as given, and the rates say so."""
    from lcflow.budget import from_run

    base = rates.load()
    base.pop("gpu", None)
    _small_run(tmp_path / "results", maps=True)
    got = from_run.rates(tmp_path / "results", base)
    startup = base["startup_cpu_s"]
    assert got["jobs"]["cube"]["cpu_s_per_unit"] == pytest.approx((10.0 - startup) / (200 * 3))
    assert got["jobs"]["sample"] == base["jobs"]["sample"]  # the run made none
    gpu = got["gpu"]
    assert gpu["device"] == "NVIDIA A100-SXM4-40GB"
    assert gpu["train_samples_per_s_per_gpu"]["lstm"] == pytest.approx(2 * 1000 / (2 * (100.0 - startup)))
    assert gpu["predict_px_s_per_gpu"]["lstm"] == pytest.approx(200 / (11.0 - startup))
    assert got["measured"].startswith(f"the run at {tmp_path / 'results'} for cube, predict_lstm_cpu, train lstm; "
                                      "the rest as ")
    with pytest.raises(LcflowError, match="no benchmarks folder: not the results folder of a finished run"):
        from_run.rates(tmp_path, base)


def test_a_run_trained_on_gpus_without_a_map_and_no_gpu_rates_is_refused(tmp_path):
    from lcflow.budget import from_run

    base = rates.load()
    base.pop("gpu", None)
    _small_run(tmp_path / "results", maps=False)
    with pytest.raises(LcflowError, match=r"lstm trained on NVIDIA A100-SXM4-40GB, but the run made no map of it"):
        from_run.rates(tmp_path / "results", base)
    done = budget("--configfile", "config/config.yaml", "--rates-from", str(tmp_path / "none"))
    assert done.returncode == 2 and "--rates-from" in done.stderr and str(tmp_path / "none") in done.stderr, \
        done.stderr


def test_the_login_node_s_stages_are_the_snakefile_s_local_rules(tmp_path):
    """The stages a Slurm budget bills nothing for are the rules the Snakefile runs where Snakemake runs,
    and every stage of such a rule is one of them."""
    block = re.search(r"^localrules:\n((?:    \w+,?\n)+)", (ROOT / "Snakefile").read_text(), re.M).group(1)
    local = set(re.findall(r"\w+", block))
    assert set(projection.LOCAL_RULES) <= local
    done = budget("--configfile", "config/config.yaml", "--json", str(tmp_path / "b.json"))
    assert done.returncode == 0, done.stderr
    for stage, row in _rows(tmp_path / "b.json").items():
        assert (projection.rule(stage) in local) == (projection.rule(stage) in projection.LOCAL_RULES), stage
        if projection.rule(stage) in local:
            assert row["cores"] == 0 and row["core_h"] == 0, stage
