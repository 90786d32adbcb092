"""The Slurm profile on a real Slurm started for the tests (tests/slurm/cluster.sh): munge, slurmctld
and two virtual nodes on this host. Site values are overridden through LCFLOW_SLURM_* variables, the
profile file itself is used as shipped."""

import csv
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import rasterio
import yaml

from ..conftest import HOSTILE_RESOURCES, ROOT, job_counts, missing, snakemake, snakemake_command
from ..http_server import serve

#: the models of the demo DAG under Slurm: the demo's forest and one of its deep models, the one it tunes
#: (every deep model goes through the same rules; each adds a training job and four maps' jobs). Both train
#: with the parameters the local run's studies found, so their maps are the local run's, and no study runs
#: in that DAG: the study rule under Slurm, two multi-rank worker jobs of one study, is
#: test_the_torch_backend_tunes_trains_and_maps_in_multi_rank_slurm_jobs
MODELS = ["rf", "lstm"]
DEEP = [m for m in MODELS if m != "rf"]
#: what the demo DAG under Slurm makes: the products that say how each model did, and so every job from the
#: data to the maps and their assessment. Not the report's pictures, STAC items and change figures: 29 one-
#: thread jobs of rules the local run makes and checks, each a Slurm job with a Snakemake of its own (about
#: 4 CPU-s apiece on CI's two cores, where the suite is CPU-bound), with no resources of their own to test
TARGETS = ["results/accuracy.tsv", "results/model_comparison.tsv"]

pytestmark = pytest.mark.integration
CLUSTER = ROOT / "tests" / "slurm" / "cluster.sh"
#: CPUs of each of the two virtual nodes: a training job's two ranks fill one, so Slurm queues jobs as a
#: real cluster does rather than starting the whole demo DAG at once on the host's few cores (each job then
#: takes nearer its time in a local run: the demo's longest training and study 1.6x, against 2.6-3x with 8)
NODE_CPUS = 2
SITE = {  # the test cluster: one partition, CPU-only nodes of NODE_CPUS CPUs, no accounting database
    "LCFLOW_SLURM_ACCOUNT": "lcflow", "LCFLOW_SLURM_CPU_PARTITION": "debug", "LCFLOW_SLURM_GPU_PARTITION": "debug",
    "LCFLOW_SLURM_GPUS_PER_NODE": "0", "LCFLOW_SLURM_TRAIN_NODES": "1", "LCFLOW_SLURM_TASKS_PER_NODE": "2",
    "LCFLOW_SLURM_CPUS_PER_TASK": "1", "LCFLOW_SLURM_CPU_CORES": str(NODE_CPUS), "LCFLOW_SLURM_NODE_CORES": str(NODE_CPUS),
    "LCFLOW_SLURM_STATUS_COMMAND": "squeue",
    # CPU-only nodes whose cores all train: waiting ranks yield (docs/slurm.md)
    "LCFLOW_SLURM_MPI": "env OMPI_MCA_mpi_yield_when_idle=1 srun --mpi=pmix",
}
FAST = ["--slurm-init-seconds-before-status-checks", "2"]
#: snakemake with status checks at most 2 s apart (the plugin backs off to 180 s: tests/slurm/snakemake_prompt.py)
SNAKEMAKE = [sys.executable, str(ROOT / "tests" / "slurm" / "snakemake_prompt.py")]


def _why_no_slurm() -> str | None:
    if os.geteuid() != 0:
        return "starting slurmd needs root"
    missing = [t for t in ("slurmctld", "slurmd", "munged", "sbatch", "srun") if not shutil.which(t) and
               not Path("/usr/sbin", t).exists()]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing; Debian: slurm-wlm munge)"
    if Path("/etc/slurm/slurm.conf").exists():
        return "/etc/slurm/slurm.conf exists: jobs would find that cluster's configuration, not the test cluster's"
    return None


@pytest.fixture(scope="module")
def slurm(tmp_path_factory) -> dict:
    """Start the test cluster; the environment that reaches it. Stopped after the module."""
    why = _why_no_slurm()
    if why:
        missing("slurm", why)
    state = tmp_path_factory.mktemp("slurm")
    started = subprocess.run([str(CLUSTER), "start", str(state)], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "LCFLOW_SLURM_CPUS": str(NODE_CPUS)})
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield {"SLURM_CONF": str(state / "slurm.conf"), **SITE}
    finally:
        subprocess.run([str(CLUSTER), "stop", str(state)], capture_output=True, timeout=60)


def _slurm(env: dict, *cmd: str, timeout: int = 60) -> str:
    out = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def side_runs(slurm, tmp_path_factory) -> dict[str, Future]:
    """The profile's failure handling on a two-rule workflow (tests/slurm/retry.smk), each case in a
    thread of its own: a job that fails once, and a job cancelled while it runs. They mostly wait on
    Slurm, so they run beside the demo DAG (their jobs queue with its jobs, as on a shared cluster)."""
    def workdir(name: str) -> Path:
        path = tmp_path_factory.mktemp(name)
        shutil.copy(ROOT / "tests" / "slurm" / "retry.smk", path / "Snakefile")
        return path

    pool = ThreadPoolExecutor(2)
    runs = {"retried": pool.submit(_retried_run, workdir("retry"), slurm),
            "cancelled": pool.submit(_cancelled_run, workdir("cancel"), slurm)}
    yield runs
    pool.shutdown(wait=True)


def on_slurm(workdir: Path, *args: str, env: dict, configfile: list[Path], timeout: int) -> subprocess.CompletedProcess:
    """The workflow in ``workdir`` under profiles/slurm, run as every Slurm test runs it (SNAKEMAKE, FAST)."""
    return snakemake(workdir, *FAST, *args, profile="slurm", program=SNAKEMAKE, env=env, configfile=configfile,
                     timeout=timeout)


def models_overlay(workdir: Path, local_results: Path) -> None:
    """``workdir/models.yaml``: MODELS for the demo's models, no study, and each model's parameters as the
    local run's study tuned them."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert set(MODELS) == set(cfg["hpo"]["models"])  # each has a local study to take its parameters from
    params = {m: {**cfg["model_params"].get(m, {}),
                  **yaml.safe_load((local_results / "hpo" / m / "best_params.yaml").read_text())["params"]}
              for m in MODELS}
    overlay = {"models": MODELS, "hpo": {"models": []}, "model_params": {**cfg["model_params"], **params}}
    (workdir / "models.yaml").write_text(yaml.safe_dump(overlay))


def configs(workdir: Path, *more: Path) -> list[Path]:
    """The demo config with ``workdir/models.yaml`` (:func:`models_overlay`) and ``workdir/served.yaml``
    (:func:`served_overlay`) where it is, then ``more``."""
    assert (workdir / "models.yaml").exists()
    served = [workdir / "served.yaml"] if (workdir / "served.yaml").exists() else []
    return [ROOT / "config" / "config.yaml", workdir / "models.yaml", *served, *more]


def served_overlay(path: Path, url: str, mode: str = "auto") -> Path:
    """A config at ``path`` whose catalogue is the demo's served at ``url`` (as a remote STAC catalogue),
    its scenes staged into ``scenes`` (``mode`` auto) or read over http by the cube's jobs (remote)."""
    path.write_text(yaml.safe_dump({"stac": {"catalog": f"{url}/catalog/catalog.json"},
                                    "stage": {"mode": mode, "dir": "scenes"}}))
    return path


#: the folder of the Slurm run's maps and accuracy.tsv as its DAG made them (:func:`slurm_run`)
AS_MADE = "as-made"
#: the tile whose cubes, labels and samples the Slurm run takes from the local run (:func:`seed`)
SEEDED = "31UFT"
YEARS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["years"]


def seed(workdir: Path, local_results: Path) -> None:
    """Give ``workdir`` the local run's demo scenes and SEEDED's cubes, labels and samples, times kept.

    The Slurm DAG then makes the other tile's (every rule still a Slurm job) and spends its time on the
    models and maps; on a host of few cores it is CPU-bound, and the label checks of a tile's samples
    take longer than all of its other jobs before training."""
    shutil.copytree(local_results.parent / HOSTILE_RESOURCES, workdir / "resources" / "demo")
    shutil.copytree(local_results / SEEDED, workdir / "results" / SEEDED)


def seeds() -> list[str]:
    """The local run's products the Slurm run starts from (:func:`models_overlay`, :func:`seed`), in its
    results directory; the demo's scenes come first in that DAG."""
    return [*(f"hpo/{m}/best_params.yaml" for m in MODELS), *(f"{SEEDED}/{y}/samples.parquet" for y in YEARS)]


@pytest.fixture(scope="module")
def slurm_run(slurm, side_runs, local_demo, tmp_path_factory) -> Path:
    """The demo DAG (MODELS, no study) through profiles/slurm to TARGETS, from the local run's demo scenes and
    SEEDED's samples (:func:`seed`); its working directory. It starts once the local run has made those
    and the studies' parameters, while the rest of the local run goes on beside it."""
    local_results = local_demo.made(*seeds())
    workdir = tmp_path_factory.mktemp("slurm-run")
    models_overlay(workdir, local_results)
    seed(workdir, local_results)
    # the compute nodes have no network: the search and the stage-in run on this host (the login node)
    # while the catalogue is served, then the server stops and the jobs read the staged files alone
    demo = workdir / "resources" / "demo"
    children = sorted(map(str, (demo / "catalog").glob("*_*/catalog.json")))  # the root of every tile-year's
    subprocess.run([str(Path(sys.executable).parent / "lcflow"), "synth-catalog", "--out", str(demo), "--children",
                    *children], check=True, capture_output=True, timeout=120)
    with serve(demo) as server:
        served_overlay(workdir / "served.yaml", server.url)
        staged = on_slurm(workdir, *(f"results/32ULC/{y}/staged.json" for y in YEARS), env=slurm,
                          configfile=configs(workdir), timeout=600)
    assert staged.returncode == 0, staged.stderr[-6000:]
    (workdir / "stage.out").write_text(staged.stdout + staged.stderr)
    done = on_slurm(workdir, *TARGETS, env=slurm, configfile=configs(workdir), timeout=2400)
    assert done.returncode == 0, done.stderr[-6000:]
    (workdir / "snakemake.out").write_text(done.stdout + done.stderr)
    # the maps and accuracies as this run made them, for the comparison with the local run once that ends
    # (the tests before it make some maps again, with other models)
    made = workdir / AS_MADE
    made.mkdir()
    for path in [workdir / "results" / "accuracy.tsv", *(workdir / "results" / "maps").glob("*.tif")]:
        shutil.copy2(path, made / path.name)
    # and its trainings' benchmark files with their ranks' own (times kept: they say which run a rank's is)
    shutil.copytree(workdir / "results" / "benchmarks" / "train", made / "benchmarks" / "train")
    return workdir


@pytest.fixture(scope="module")
def local_run(slurm_run, local_demo) -> Path:
    """The local demo run's results directory, the whole DAG made: after the Slurm run, which starts beside
    its later part (a test asking for the session's ``local_demo_run`` would have it made first, as pytest
    sets up wider-scoped fixtures first)."""
    return local_demo.results()


def local_rules() -> set[str]:
    """The rules the Snakefile runs where Snakemake runs (``localrules:``), not as Slurm jobs, and those that
    read the network, which run there too under the default ``stage.where``."""
    block = re.search(r"^localrules:\n((?:    \w+,?\n)+)", (ROOT / "Snakefile").read_text(), re.M)
    rules = "".join(p.read_text() for p in (ROOT / "workflow" / "rules").glob("*.smk"))
    network = re.findall(r"^( *)rule (\w+):\n(?:\1    .*\n|\n)*?\1    localrule: (?:NETWORK_ON_HOST|True)$", rules, re.M)
    return set(re.findall(r"\w+", block.group(1))) | {name for _, name in network}


def submitted(output: str) -> dict[str, str]:
    """Slurm job id -> its job log path (rule and wildcards), as the executor reports them."""
    return dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: (\S+)\)", output))


# its set-up runs the local demo DAG's first part (the first test of the suite to need it), then the Slurm DAG
# beside the rest of the local DAG: each within its own timeout (1500 s, 2400 s), together past pytest's
# 1200 s for a test. The tests that need the whole local run come last, so that the Slurm tests before them
# run while it ends
@pytest.mark.timeout(4000)
def test_demo_dag_through_the_slurm_profile_runs_every_job_but_the_local_rules_on_slurm(slurm_run):
    results = slurm_run / "results"
    # every job was a Slurm job (their logs are removed once they succeed), but the Snakefile's local rules
    jobs = submitted((slurm_run / "snakemake.out").read_text())
    counts = job_counts((slurm_run / "snakemake.out").read_text())
    local = local_rules()
    assert {"all", "stac_catalog", "hpo_summary"} <= local and not local & {"cube", "train", "predict", "assess"}
    assert len(jobs) >= sum(n for rule, n in counts.items() if rule not in local), (jobs, counts)  # retries add
    # the other tile's data were made here: its scenes searched and staged where Snakemake runs, while the
    # catalogue was served; its cubes, labels and samples as Slurm jobs, with the server gone
    staged = (slurm_run / "stage.out").read_text()
    assert job_counts(staged) == {"search": 2, "stage": 2} and not submitted(staged), staged[-3000:]
    assert "search" not in counts and "stage" not in counts, counts
    assert (counts["cube"], counts["labels"], counts["sample"]) == (2, 1, 2), counts
    for year in YEARS:
        for item in json.loads((results / "32ULC" / str(year) / "staged.json").read_text())["features"]:
            assert all(Path(a["href"]).is_relative_to(slurm_run / "scenes") for a in item["assets"].values()), item
    assert {Path(log).parent.name for log in jobs.values() if "/rule_sample/" in log} == {"32ULC_2018", "32ULC_2019"}
    assert not [log for log in jobs.values() if any(f"/rule_{rule}/" in log for rule in local)], jobs


def test_training_is_one_slurm_job_with_two_horovod_ranks(slurm_run):
    train_jobs = [log for log in submitted((slurm_run / "snakemake.out").read_text()).values() if "/rule_train/" in log]
    assert sorted(Path(log).parent.name for log in train_jobs) == sorted(DEEP), train_jobs  # one job a model
    for model in DEEP:
        log = (slurm_run / "results" / "logs" / "train" / f"{model}.log").read_text()
        ranks = set(re.findall(r"rank=(\d) size=2 local_rank=\d node=(n\d)", log))
        assert {r for r, _ in ranks} == {"0", "1"}, log[:2000]
        metrics = json.loads((slurm_run / "results" / "models" / model / "metrics.json").read_text())
        assert metrics["world_size"] == 2 and metrics["launcher"] == "horovod"


def test_forcerun_of_one_stage_reruns_only_its_downstream(slurm_run, slurm):
    dry = snakemake(slurm_run, *TARGETS, "-n", "--forcerun", "train", profile="slurm", env=slurm,
                    configfile=configs(slurm_run), timeout=300)
    assert dry.returncode == 0, dry.stderr[-3000:]
    plan = dry.stdout + dry.stderr
    # the deep models' four maps each and their assessments again; the forest's stay as they are
    n = len(DEEP)
    assert job_counts(plan) == {"train": n, "predict": 4 * n, "consistent_maps": 2 * n, "assess": 4 * n,
                                "summary": 1, "compare_models": 1}
    assert "model=rf" not in plan and all(f"model={m}" in plan for m in DEEP)


def test_training_spans_two_nodes(slurm_run, slurm):
    """Rerun training alone as one job of 2 nodes x 2 tasks: four ranks, on n1 and n2, each with the
    network variable the profile's per-job set-up (JOB_SETUP) exported in the job."""
    # The virtual nodes share one host: Open MPI's shared-memory transport (vader) then pairs ranks of
    # "different nodes" through colliding segments and crashes in MPI_Comm_dup. On a real cluster nodes
    # are hosts and vader is only used within one; here ranks talk TCP.
    assert "NCCL_SOCKET_IFNAME" not in os.environ
    env = {**slurm, "LCFLOW_SLURM_TRAIN_NODES": "2", "OMPI_MCA_btl": "self,tcp",
           "LCFLOW_SLURM_JOB_SETUP": "export NCCL_SOCKET_IFNAME=lo; echo job set-up on $(hostname) >&2"}
    # mtime triggers: the forced training alone runs, not every job whose parameters the override changes
    done = on_slurm(slurm_run, "results/models/lstm/model.json", "--forcerun", "train", "--rerun-triggers", "mtime",
                    "--config", "model_params={lstm: {epochs: 3, min_steps: 0, hidden_size: 32}}", env=env,
                    configfile=configs(slurm_run), timeout=1200)
    assert done.returncode == 0, done.stderr[-4000:]
    assert job_counts(done.stdout + done.stderr) == {"train": 1}
    log = (slurm_run / "results" / "logs" / "train" / "lstm.log").read_text()
    placed = dict(re.findall(r"rank=(\d) size=4 local_rank=\d node=(n\d)", log))
    assert set(placed) == {"0", "1", "2", "3"} and set(placed.values()) == {"n1", "n2"}, log[:3000]
    seen = dict(re.findall(r"rank=(\d) network: (.*)", log))
    assert set(seen) == set(placed) and all("NCCL_SOCKET_IFNAME=lo" in v.split() for v in seen.values()), seen
    (job,) = submitted(done.stdout + done.stderr)
    shown = _slurm(slurm, "squeue", "-j", job, "-h", "-t", "all", "-o", "%D %T")
    assert shown.split() == ["2", "COMPLETED"]



def test_a_deep_map_is_predicted_by_ranks_on_two_nodes(slurm_run, slurm, tmp_path):
    """One tile-year's lstm map as one job of 2 nodes x 2 tasks: four ranks on n1 and n2 share its 16
    windows, and the map, confidence and probabilities are those one process writes, to the byte."""
    env = {**slurm, "LCFLOW_SLURM_PREDICT_NODES": "2", "OMPI_MCA_btl": "self,tcp"}
    results = slurm_run / "results"
    raw = results / "maps" / "raw"
    overlay = tmp_path / "windows.yaml"  # a file: --config would pass the nested number as text
    overlay.write_text("predict: {block_px: 64}\n")
    # mtime triggers: the model is whatever an earlier test left (retrained with other parameters); only
    # this map is to be made again
    done = on_slurm(slurm_run, "results/maps/raw/31UFT_2018_lstm.tif", "--forcerun", "predict", "--notemp",
                    "--rerun-triggers", "mtime", env=env, configfile=configs(slurm_run, overlay), timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert job_counts(done.stdout + done.stderr) == {"predict": 1}
    log = (results / "logs" / "predict" / "31UFT_2018_lstm.log").read_text()
    shares = re.findall(r"rank (\d) of 4 \(local rank \d\): windows (\d+)\.\.(\d+) of 16", log)
    assert sorted(shares) == [("0", "0", "3"), ("1", "4", "7"), ("2", "8", "11"), ("3", "12", "15")], log[-3000:]
    (job,) = submitted(done.stdout + done.stderr)
    assert _slurm(slurm, "squeue", "-j", job, "-h", "-t", "all", "-o", "%D %T").split() == ["2", "COMPLETED"]
    one = {k: tmp_path / f"{k}.tif" for k in ("map", "confidence", "probabilities")}
    alone = subprocess.run([str(Path(sys.executable).parent / "lcflow"), "predict", "--model-dir",
                            str(results / "models" / "lstm"), "--cube", str(results / "31UFT" / "2018" / "cube.tif"),
                            "--out", str(one["map"]), "--confidence", str(one["confidence"]),
                            "--probabilities", str(one["probabilities"]), "--block", "64"],
                           capture_output=True, text=True, timeout=600)
    assert alone.returncode == 0, alone.stderr[-2000:]
    assert one["map"].read_bytes() == (raw / "31UFT_2018_lstm.tif").read_bytes()
    assert one["confidence"].read_bytes() == (raw / "31UFT_2018_lstm_confidence.tif").read_bytes()
    assert one["probabilities"].read_bytes() == (raw / "31UFT_2018_lstm_probabilities.tif").read_bytes()
    assert not list(raw.glob(".lcflow-*"))  # the ranks' windows and the writer locks are gone once published

def _with_tools(env: dict) -> dict:
    """This process's environment with this interpreter's tools first on PATH, ``env`` over it."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **env}


def _small(workdir: Path, env: dict, *args: str) -> subprocess.Popen:
    """Snakemake on the small workflow in ``workdir`` under the Slurm profile, its output going to
    workdir/snakemake.out (a pipe nobody reads while it waits could fill up)."""
    env = _with_tools(env)
    cmd = [*SNAKEMAKE, "-d", str(workdir), "-s", str(workdir / "Snakefile"), "--profile",
           str(ROOT / "profiles" / "slurm"), *FAST, *args]
    with (workdir / "snakemake.out").open("w") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)


def _retried_run(workdir: Path, env: dict) -> tuple[Path, int, str]:
    """Run the workflow to its end; (workdir, exit status, output)."""
    proc = _small(workdir, env)
    try:
        proc.wait(timeout=1200)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return workdir, proc.returncode, (workdir / "snakemake.out").read_text()


def _cancelled_run(workdir: Path, env: dict) -> tuple[Path, int, str, str | None]:
    """Start the slow rule, cancel its Slurm job once it runs; (workdir, exit status, output, job id)."""
    proc = _small(workdir, env, "slow.txt", "--retries", "0")
    try:
        job = None
        deadline = time.time() + 900  # it may queue behind the demo DAG's jobs
        while time.time() < deadline and job is None and proc.poll() is None:
            if (workdir / "slow.txt").exists():
                listed = _slurm(env, "squeue", "-h", "-t", "running", "-o", "%i %k")
                job = next((line.split()[0] for line in listed.splitlines() if "rule_slow" in line), None)
            time.sleep(0.5)
        if job:
            _slurm(env, "scancel", job)
            proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return workdir, proc.returncode, (workdir / "snakemake.out").read_text(), job


@pytest.mark.parametrize("name, value", [("SBATCH_EXTRA", "--comment=$(touch {mark})"),
                                         ("CONTAINER", "env `touch {mark}`"),
                                         ("JOB_SETUP", "touch {mark}; if then")])
def test_site_values_with_shell_text_are_refused_before_any_job_is_queued(name, value, slurm, tmp_path):
    """A real run (not a dry run) on the test cluster: Snakemake ends in one line naming the value, no job
    reaches Slurm, and the shell text never ran (its file is not there)."""
    mark = tmp_path / "ran"
    shutil.copy(ROOT / "tests" / "slurm" / "retry.smk", tmp_path / "Snakefile")
    proc = _small(tmp_path, {**slurm, f"LCFLOW_SLURM_{name}": value.format(mark=mark)})
    proc.wait(timeout=300)
    out = (tmp_path / "snakemake.out").read_text()
    said = [line for line in out.splitlines() if line.startswith("profiles/slurm: ")]
    assert proc.returncode != 0 and len(said) == 1, out[-3000:]
    assert said[0].startswith(f"profiles/slurm: site value {name}="), said
    # no job submitted (the plugin logs each submission), none ran (its rule appends to attempts.txt)
    assert not mark.exists() and "has been submitted" not in out and not (tmp_path / "attempts.txt").exists()


def test_a_failing_job_is_retried_with_more_memory(side_runs):
    workdir, returncode, out = side_runs["retried"].result(timeout=1500)
    assert returncode == 0, out[-3000:]
    assert (workdir / "attempts.txt").read_text().split() == ["attempt", "2000", "attempt", "4000"]
    assert (workdir / "retried.txt").read_text() == "done\n"


def test_a_cancelled_job_leaves_no_output(side_runs):
    workdir, returncode, out, job = side_runs["cancelled"].result(timeout=1500)
    assert job, f"the slow job never ran: {out[-3000:]}"
    assert returncode != 0
    assert f"SLURM-job '{job}' failed, SLURM status is: 'CANCELLED'" in out, out[-3000:]
    assert not (workdir / "slow.txt").exists()


def test_a_plain_rerun_makes_again_what_a_failed_submission_left_missing(slurm_run, slurm, tmp_path):
    """A forced cube whose Slurm submission fails (a partition the cluster has not): Snakemake deletes the
    cube before it submits, so it is gone. Nothing made from it needs it again (its samples and maps are
    there), yet a plain rerun (rule all) plans it, as a missing file of the run."""
    work = tmp_path / "work"
    shutil.copytree(slurm_run, work, symlinks=True, ignore=shutil.ignore_patterns(".snakemake"))
    cube = work / "results" / "32ULC" / "2018" / "cube.tif"
    assert cube.exists()
    failed = on_slurm(work, *TARGETS, "--forcerun", "results/32ULC/2018/cube.tif", "--set-resources",
                      "cube:slurm_partition=no_such_partition", env=slurm, configfile=configs(work), timeout=600)
    assert failed.returncode != 0
    assert "invalid partition specified: no_such_partition" in failed.stdout + failed.stderr
    assert not cube.exists()  # deleted before the submission that failed
    plan = snakemake(work, "-n", profile="slurm", env=slurm, configfile=configs(work), timeout=300)
    assert plan.returncode == 0, plan.stderr[-3000:]
    cube_jobs = re.findall(r"rule cube:\n(?:    .*\n)*?    reason: (.*)\n(?:    .*\n)*?    wildcards: tile=(\w+), year=(\d+)",
                           plan.stdout)
    assert [(t, y) for reason, t, y in cube_jobs if "Missing output files" in reason and "cube.tif" in reason] == \
        [("32ULC", "2018")], plan.stdout[-4000:]


def test_with_remote_reading_the_cube_job_reads_the_scenes_over_http(slurm_run, slurm, tmp_path):
    """stage.mode remote: no stage-in, the cube's Slurm job reads the served catalogue's scenes over http,
    and makes the cube the staged files made."""
    work = tmp_path / "work"
    shutil.copytree(slurm_run, work, symlinks=True, ignore=shutil.ignore_patterns(".snakemake", "scenes", "logs"))
    cube = work / "results" / "32ULC" / "2018" / "cube.tif"
    staged = tmp_path / "staged_cube.tif"
    shutil.copy(cube, staged)
    with serve(work / "resources" / "demo") as server:
        served_overlay(work / "served.yaml", server.url, mode="remote")
        done = on_slurm(work, "results/32ULC/2018/cube.tif", "--forcerun", "search", env=slurm,
                        configfile=configs(work), timeout=600)
        tif = sum(n for name, n in server.requests.items() if name.endswith(".tif"))
    assert done.returncode == 0, done.stderr[-4000:]
    output = done.stdout + done.stderr
    assert job_counts(output) == {"search": 1, "cube": 1} and len(submitted(output)) == 1, output[-3000:]
    assert tif > 0 and "staged.json" not in output
    with rasterio.open(cube) as a, rasterio.open(staged) as b:
        np.testing.assert_array_equal(a.read(), b.read())


MODEL = f"results/models/{DEEP[0]}/model.json"


def _queue(slurm: dict) -> list[str]:
    return _slurm(slurm, "squeue", "-h", "-o", "%i").split()


#: the restart tests' training: a short one (about a minute under the test cluster, where the demo's takes five),
#: long enough to be killed while it trains; every command of a restart names it
SHORT = ("--config", f"model_params={{{DEEP[0]}: {{epochs: 8, min_steps: 0}}}}")


def _controller_killed_while_training(slurm_run: Path, slurm: dict, work: Path) -> float:
    """The Slurm run's folder copied to ``work`` without its deep model, a controller making that model (SHORT)
    started and killed with SIGKILL once its training job trains; the time of the kill."""
    shutil.copytree(slurm_run, work, symlinks=True, ignore=shutil.ignore_patterns(".snakemake"))
    shutil.rmtree(work / "results" / "models" / DEEP[0])
    cmd, env = snakemake_command(work, *FAST, MODEL, *SHORT, profile="slurm", program=SNAKEMAKE, env=slurm,
                                 configfile=configs(work))
    log = work / "results" / "logs" / "train" / f"{DEEP[0]}.log"
    log.unlink(missing_ok=True)
    with (work / "controller.out").open("w") as out:
        controller = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 600
        while time.time() < deadline and controller.poll() is None and not (
                log.exists() and "round 1/" in log.read_text(errors="replace")):
            time.sleep(0.5)
    finally:
        os.killpg(controller.pid, signal.SIGKILL)
        controller.wait()
    assert "round 1/" in log.read_text(errors="replace"), (work / "controller.out").read_text()[-3000:]
    assert _queue(slurm), "the training job ended with its controller"
    return time.time()


def _restart(work: Path, slurm: dict) -> subprocess.CompletedProcess:
    """The restart of docs/slurm.md, 'After the controller died': --unlock, then the same command."""
    unlocked = on_slurm(work, MODEL, *SHORT, "--unlock", env=slurm, configfile=configs(work), timeout=300)
    assert unlocked.returncode == 0, unlocked.stderr[-3000:]
    return on_slurm(work, MODEL, *SHORT, env=slurm, configfile=configs(work), timeout=900)


# run alone, the first of these sets up the Slurm DAG (slurm_run) as well
@pytest.mark.timeout(4000)
@pytest.mark.parametrize("when", ["while the orphan trains", "after the orphan finished"])
def test_a_restarted_controller_keeps_the_model_its_killed_predecessor_s_job_made(when, slurm_run, slurm,
                                                                                    tmp_path):
    """SIGKILL to the controller while its training job trains; restarted as docs/slurm.md says, at once or
    once that orphaned job has finished: the model it made is kept, and no training runs again."""
    work = tmp_path / "work"
    killed = _controller_killed_while_training(slurm_run, slurm, work)
    if when == "after the orphan finished":
        deadline = time.time() + 600
        while _queue(slurm) and time.time() < deadline:
            time.sleep(1)
        assert (work / MODEL).exists()
    done = _restart(work, slurm)
    said = done.stdout + done.stderr
    (tmp_path / "restart.out").write_text(said)
    assert done.returncode == 0, said[-4000:]
    model = work / MODEL
    assert model.exists() and model.stat().st_mtime >= killed  # the orphan's: it finished after the kill
    log = (work / "results" / "logs" / "train" / f"{DEEP[0]}.log").read_text(errors="replace")
    if job_counts(said).get("train"):
        # its train job waited for the orphan and found the model complete
        assert "nothing to do, nothing written" in log, log[-3000:]
    assert "Removing output files of failed job" not in said
    if when == "after the orphan finished":  # its job recorded the model as finished: nothing to plan
        assert "train" not in job_counts(said), said[-3000:]
    plan = snakemake(work, MODEL, *SHORT, "-n", profile="slurm", env=slurm, configfile=configs(work), timeout=300)
    assert plan.returncode == 0 and "train" not in job_counts(plan.stdout + plan.stderr), plan.stdout[-3000:]


def _submit_controller(slurm: dict, workdir: Path, options: list[str], target: str,
                       timeout: int) -> subprocess.CompletedProcess:
    """``sbatch OPTIONS profiles/slurm/controller.sh`` on the test cluster's partition and account, run
    from ``workdir``, which gets the small workflow (tests/slurm/retry.smk) to make ``target`` of."""
    shutil.copy(ROOT / "tests" / "slurm" / "retry.smk", workdir / "Snakefile")
    env = _with_tools({**slurm, "LCFLOW_SNAKEMAKE": shlex.join(SNAKEMAKE),
                       "LCFLOW_PROFILE": str(ROOT / "profiles" / "slurm")})
    return subprocess.run(["sbatch", "-A", "lcflow", "-p", "debug", *options,
                           str(ROOT / "profiles" / "slurm" / "controller.sh"), *FAST, target],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_controller_as_a_slurm_job_submits_the_workflow_s_jobs_and_ends_with_them(slurm, tmp_path):
    """profiles/slurm/controller.sh, submitted with sbatch as docs/slurm.md says for a run of days: the
    Snakemake controller runs as a light Slurm job and submits the workflow's jobs from there."""
    done = _submit_controller(slurm, tmp_path, ["--wait", "-t", "10"], "controlled.txt", timeout=600)
    (log,) = tmp_path.glob("lcflow-controller-*.log")
    said = log.read_text()
    assert done.returncode == 0, (done.stderr + said)[-3000:]
    controller = re.search(r"Submitted batch job (\d+)", done.stdout).group(1)
    (job,) = submitted(said)
    assert job != controller and (tmp_path / "controlled.txt").read_text().strip() in ("n1", "n2", socket.gethostname())
    assert "running snakemake in a SLURM job context" in said  # the executor's own word, as docs/slurm.md says


def test_a_controller_near_its_time_limit_hands_over_to_the_next(slurm, tmp_path):
    """The signal Slurm sends five minutes before the controller's limit (sent here at once): its jobs are
    cancelled and the next controller, queued behind it with its time limit, runs the workflow on."""
    def queue() -> dict[str, tuple[str, str, str]]:
        """job id -> (name, state, time limit)"""
        return {i: (n, st, lim) for i, n, st, lim in (line.split() for line in _slurm(
            slurm, "squeue", "-h", "-o", "%i %j %T %l").splitlines())}

    def until(check, what: str, seconds: float = 300):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if found := check():
                return found
            time.sleep(0.5)
        raise AssertionError(f"{what}: not within {seconds} s; queue {queue()}")

    first = _submit_controller(slurm, tmp_path, ["--parsable", "-t", "17"], "slow.txt", timeout=60).stdout.strip()
    try:
        job = until(lambda: next((i for i, (n, st, _) in queue().items() if n != "lcflow-controller"
                                  and st == "RUNNING"), None), "the controller's job running")
        _slurm(slurm, "scancel", "--batch", "--signal=USR1", first)
        nxt = until(lambda: next((i for i, (n, st, _) in queue().items() if n == "lcflow-controller" and i != first
                                  and st == "RUNNING"), None), "the next controller running")
        again = until(lambda: next((i for i, (n, _, _) in queue().items() if n != "lcflow-controller"), None),
                      "the next controller's job")
        assert job not in queue() and first not in queue() and again != job
        assert queue()[nxt][2] == "17:00"  # the time limit it was given
    finally:
        _slurm(slurm, "scancel", "-u", os.environ.get("USER", "root"), "-n", "lcflow-controller")
        until(lambda: not queue(), "the queue empty", 120)
    said = (tmp_path / f"lcflow-controller-{first}.log").read_text()
    assert f"lcflow controller {first}: next controller: job {nxt}" in said, said[-2000:]
    assert (tmp_path / f"lcflow-controller-{nxt}.log").exists()


# waits for the rest of the local DAG (LocalDemo.TIMEOUT, 1500 s, from its start)
@pytest.mark.timeout(1800)
def test_demo_dag_through_the_slurm_profile_maps_like_a_local_run(slurm_run, local_run):
    made = slurm_run / AS_MADE
    local = {r["map"]: r for r in csv.DictReader((local_run / "accuracy.tsv").open(), delimiter="\t")}
    remote = {r["map"]: r for r in csv.DictReader((made / "accuracy.tsv").open(), delimiter="\t")}
    assert set(remote) <= set(local) and len(remote) == 4 * len(MODELS)
    assert {row["model"] for row in remote.values()} == set(MODELS)
    # the same map, pixel for pixel, and the same accuracy: the forest is deterministic, and the deep model
    # trains on two Horovod ranks of one thread either way, Gloo locally and MPI under Slurm, with the same
    # parameters (models_overlay), and a two-rank allreduce adds the same two numbers whichever library does
    for name, row in remote.items():
        with rasterio.open(made / f"{name}.tif") as a, rasterio.open(local_run / "maps" / f"{name}.tif") as b:
            np.testing.assert_array_equal(a.read(1), b.read(1), err_msg=name)
        assert row["truth_OA"] == local[name]["truth_OA"] and float(row["truth_OA"]) >= 0.9, (row, local[name])


def test_a_two_rank_slurm_training_s_cpu_is_its_ranks_as_a_local_run_measures_it(slurm_run, local_run, tmp_path):
    """job_resources under Slurm: srun's ranks are not the job shell's children, so the benchmark file sees
    the launcher alone; the ranks' own measurement (lcflow.common.rank_usage) gives the job's CPU, within
    2x of what the same training costs on two local ranks: lcflow budget's, from the rate a local demo run
    measured (rates.json), and the local run's own where its training was not resumed from a trial's
    checkpoint (in this session it is: its study trained it)."""
    from lcflow import job_resources

    here = job_resources.read(slurm_run / AS_MADE / "benchmarks").set_index("job")  # its trainings alone
    there = job_resources.read(local_run / "benchmarks").query("stage == 'train'").set_index("job")
    done = subprocess.run([str(Path(sys.executable).parent / "lcflow"), "budget", "--configfile",
                           *map(str, configs(slurm_run)), "--directory", str(slurm_run), "--profile", "local",
                           "--json", str(tmp_path / "budget.json")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    budgeted = {r["stage"]: r["cpu_s"] for r in json.loads((tmp_path / "budget.json").read_text())["rows"]}
    for model in DEEP:
        raw = pd.read_csv(slurm_run / AS_MADE / "benchmarks" / "train" / f"{model}.tsv", sep="\t").iloc[-1]
        said = (model, here.loc[model].to_dict(), there.loc[model].to_dict(), float(raw["cpu_time"]),
                budgeted[f"train {model}"])
        assert here.loc[model, "ranks"] == 2 and there.loc[model, "ranks"] == 2, said
        assert 0.5 <= here.loc[model, "cpu_s"] / budgeted[f"train {model}"] <= 2, said
        if "resumed" not in json.loads((local_run / "models" / model / "metrics.json").read_text()):
            assert 0.5 <= here.loc[model, "cpu_s"] / there.loc[model, "cpu_s"] <= 2, said


def test_the_torch_backend_tunes_trains_and_maps_in_multi_rank_slurm_jobs(slurm_run, slurm, local_run, tmp_path):
    """distributed.backend: torch under profiles/slurm, nothing else changed: a study of lstm by two worker
    jobs of 2 ranks each (one study), its final training and one map, each a Slurm job whose ranks
    srun starts and torch.distributed joins; the same files as Horovod's jobs wrote (the local run's study,
    the Slurm run's model)."""
    results = slurm_run / "results"
    horovod = {"hpo/lstm": sorted(p.name for p in (local_run / "hpo" / "lstm").iterdir()),
               "models/lstm": sorted(p.name for p in (results / "models" / "lstm").iterdir())}
    assert not (results / "hpo").exists()  # a new study: the Slurm DAG ran none
    overlay = tmp_path / "torch.yaml"  # a file: --config would pass the nested numbers as text
    overlay.write_text(yaml.safe_dump({
        "distributed": {"backend": "torch"},
        "hpo": {"models": ["lstm"], "trials": 3, "workers": 2, "min_rounds": 2,
                "space": {"lstm": {"learning_rate": {"low": 0.001, "high": 0.01, "log": True}}}},
        "model_params": {"lstm": {"epochs": 3, "min_steps": 0, "evaluations": 3, "hidden_size": 16}}}))
    # the study is forced, and what follows from it reruns; mtime triggers keep the rest as it is
    done = on_slurm(slurm_run, "results/maps/raw/31UFT_2018_lstm.tif", "--forcerun", "hpo", "--rerun-triggers", "mtime",
                    env=slurm, configfile=configs(slurm_run, overlay), timeout=1500)
    assert done.returncode == 0, done.stderr[-4000:]
    out = done.stdout + done.stderr
    assert job_counts(out) == {"hpo": 2, "hpo_summary": 1, "train": 1, "predict": 1}
    # one Slurm job per worker (and a second attempt where the profile's retry was needed)
    hpo_jobs = {Path(log).parent.name for log in submitted(out).values() if "/rule_hpo/" in log}
    assert hpo_jobs == {"lstm_0", "lstm_1"}, submitted(out)
    trials = {}
    for worker in (0, 1):
        log = (results / "logs" / "hpo" / f"lstm_{worker}.log").read_text()
        assert f"worker {worker}, 2 rank(s)" in log, log[-3000:]
        for number, rank, drawn in re.findall(r"trial (\d+) rank=(\d) size=2 params (\{.*\})", log):
            trials.setdefault(number, {})[rank] = drawn
    # (a retried worker's log is its last attempt's)
    assert trials and all(set(t) == {"0", "1"} and t["0"] == t["1"] for t in trials.values()), trials
    best = yaml.safe_load((results / "hpo" / "lstm" / "best_params.yaml").read_text())
    assert best["world_size"] == 2 and best["trials"]["complete"] + best["trials"]["pruned"] == 3, best
    log = (results / "logs" / "train" / "lstm.log").read_text()
    assert {r for r, _ in re.findall(r"rank=(\d) size=2 local_rank=\d node=(n\d)", log)} == {"0", "1"}, log[:2000]
    metrics = json.loads((results / "models" / "lstm" / "metrics.json").read_text())
    assert metrics["launcher"] == "torch" and metrics["world_size"] == 2 and metrics["tuned"]["study"] == best["study"]
    # the final training job took the best trial's ended run, which another Slurm job wrote, and trained nothing
    assert metrics["resumed"]["finished_before"] and "holds this run ended" in log and "round=1 rank=" not in log
    log = (results / "logs" / "predict" / "31UFT_2018_lstm.log").read_text()
    assert len(re.findall(r"rank \d of 2 \(local rank \d\): windows", log)) == 2, log[-3000:]
    assert {d: sorted(p.name for p in (results / d).iterdir()) for d in horovod} == horovod
