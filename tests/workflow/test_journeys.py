"""The journeys users come for, planned as they type them: a layered config, the Slurm profile by name and
by path, a dry run on a machine without the cluster's launchers."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import rasterio
import yaml

from ..conftest import ROOT, SMALL_AOI, job_counts, snakemake

DEMO = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def _bare_path(tmp_path: Path) -> str:
    """A PATH of this environment's tools and the shell's basics, without Slurm's or MPI's programs."""
    tools = tmp_path / "bare-bin"
    tools.mkdir()
    for name in ("bash", "sh", "env", "which", "cat", "ls", "uname", "git"):
        found = subprocess.run(["which", name], capture_output=True, text=True).stdout.strip()
        if found:
            (tools / name).symlink_to(found)
    return f"{Path(sys.executable).parent}{os.pathsep}{tools}"


def test_a_config_that_drops_a_tile_layers_over_the_demo(tmp_path):
    """`tiles: [31UFT]` over the demo config: the other tile's aoi is left unused, and only 31UFT is planned."""
    over = tmp_path / "one-tile.yaml"
    over.write_text("tiles: [31UFT]\n")
    done = snakemake(tmp_path, "-n", configfile=[ROOT / "config" / "config.yaml", over], timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = job_counts(done.stdout)
    assert counts["search"] == counts["cube"] == len(DEMO["years"]) and counts["labels"] == 1
    assert counts["synth_scenes"] == len(DEMO["years"]) and "32ULC" not in done.stdout


def test_a_lone_override_says_which_file_and_how_to_layer_it(tmp_path):
    over = tmp_path / "one-tile.yaml"
    over.write_text("tiles: [31UFT]\n")
    done = snakemake(tmp_path, "-n", configfile=over, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode != 0
    assert f"is a required property (config files: {over}): a config names tiles, years" in said, said[-2000:]
    assert f"give both, yours last: --configfile config/config.yaml {over}" in said


def test_the_slurm_profile_plans_without_the_cluster_s_launchers(tmp_path):
    """`snakemake --profile profiles/slurm -n` on a laptop or a login node without srun: the plan, and a
    warning that the account is still the placeholder; a real run there stops before any job, in one line
    saying where to run it."""
    env = {"PATH": _bare_path(tmp_path), "HOME": str(tmp_path)}
    done = snakemake(tmp_path, "-n", profile="slurm", env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = job_counts(done.stdout)
    assert counts["train"] == len([m for m in DEMO["models"] if m != "rf"])
    assert "account is the placeholder 'my-project'; a real run refuses it" in done.stderr
    # Snakemake lists every job as "rule" in a dry run: the rules that run here are named (search and the
    # stage-in, which read the network, under the default stage.where host), the cluster's are not
    [local] = [line for line in done.stderr.splitlines() if line.startswith("lcflow: under Slurm these rules run here")]
    named = set(local.rpartition(": ")[2].split(", "))
    assert {"search", "stage", "synth_catalog", "quicklook", "all"} <= named and not {"cube", "train", "predict"} & named
    real = snakemake(tmp_path, profile="slurm", env=env, timeout=300)
    said = real.stdout + real.stderr
    assert real.returncode != 0 and "lcflow: srun, which the profile starts the distributed jobs with, is neither " \
                                    "beside" in said and "a Slurm login node" in said, said[-2000:]
    assert not (tmp_path / "results").exists() and not (tmp_path / "resources").exists()  # no job ran


def test_the_placeholder_account_is_refused_before_any_job(tmp_path):
    """Where srun is found, a Slurm run with the profile's placeholder account stops before submitting."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for name in ("srun", "sbatch", "squeue", "sacct", "scancel"):
        (tools / name).write_text("#!/bin/sh\necho should-not-run >&2\nexit 1\n")
        (tools / name).chmod(0o755)
    env = {"PATH": f"{tools}{os.pathsep}{_bare_path(tmp_path)}", "HOME": str(tmp_path)}
    done = snakemake(tmp_path, profile="slurm", env=env, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode != 0 and "the Slurm profile's account is still the placeholder 'my-project'" in said, \
        said[-2000:]
    assert "should-not-run" not in said and not (tmp_path / "results").exists()


def test_make_slurm_profile_lets_snakemake_find_the_profile_by_name(tmp_path):
    """After `make slurm-profile` (HOME and XDG_CONFIG_HOME in a scratch directory), `snakemake --profile
    slurm -n` from the checkout plans the workflow; a profile of that name of the user's own is left alone."""
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    made = subprocess.run(["make", "-s", "-C", str(ROOT), "slurm-profile"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert made.returncode == 0, made.stderr
    link = tmp_path / "config" / "snakemake" / "slurm"
    assert link.is_symlink() and link.resolve() == (ROOT / "profiles" / "slurm").resolve()
    plan = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "--profile", "slurm", "-n", "-d",
                           str(tmp_path / "work"), "--configfile", str(ROOT / "config" / "config.yaml")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert "Using profile slurm for setting default command line arguments" in plan.stdout + plan.stderr
    own = {**env, "XDG_CONFIG_HOME": str(tmp_path / "other")}
    (tmp_path / "other" / "snakemake" / "slurm").mkdir(parents=True)
    refused = subprocess.run(["make", "-s", "-C", str(ROOT), "slurm-profile"], env=own, capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode != 0 and "exists and is not lcflow's profile: leave it" in refused.stdout
    assert list((tmp_path / "other" / "snakemake" / "slurm").iterdir()) == []


def test_site_values_for_typed_gpus_qos_constraint_and_node_memory_reach_the_jobs(tmp_path):
    env = {"LCFLOW_SLURM_GPU_TYPE": "a100", "LCFLOW_SLURM_QOS": "normal", "LCFLOW_SLURM_GPU_CONSTRAINT": "a100&ib",
           "LCFLOW_SLURM_GPU_MEM_MB": "480000", "LCFLOW_SLURM_ACCOUNT": "proj42", "LCFLOW_SLURM_FOREST_MAP_GPUS": "1",
           "LCFLOW_SLURM_SBATCH_EXTRA": "--hint=nomultithread --mail-type=FAIL"}
    done = snakemake(tmp_path, "-n", profile="slurm", env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = {}
    for rule, resources in re.findall(r"rule (\w+):\n.*?resources: ([^\n]*)", done.stdout, re.DOTALL):
        jobs.setdefault(rule, set()).add(resources)
    for rule in ("train", "predict", "hpo"):
        for resources in jobs[rule]:
            assert "gres=gpu:a100:4" in resources and "constraint=a100&ib" in resources, resources
            assert "mem_mb=480000" in resources and "qos=normal" in resources and "slurm_account=proj42" in resources
    for resources in jobs["predict_rf"]:  # the forest's maps on one GPU (predict_engine: tensors)
        assert "gres=gpu:a100:1" in resources and "slurm_partition=booster" in resources, resources
    assert all("qos=normal" in r and "gres" not in r and "constraint" not in r for r in jobs["cube"])
    assert all("slurm_extra=--hint=nomultithread --mail-type=FAIL" in r for rule in jobs for r in jobs[rule]
               if "slurm_account" in r), jobs
    assert "placeholder" not in done.stderr


def test_a_site_container_runs_every_lcflow_command_and_each_rank(tmp_path):
    """CONTAINER (``apptainer exec --nv IMAGE``): the backend check runs in the image, every rank of a
    multi-node job is started in it by srun, and a job's own lcflow commands run in it too. The image is a
    stand-in that logs each call and runs it here."""
    log = tmp_path / "calls.log"
    image = tmp_path / "apptainer-exec"
    image.write_text(f'#!/usr/bin/env bash\nshift\necho "$*" >> {log}\nexec "$@"\n')
    image.chmod(0o755)
    container = f"{image} --nv"
    done = snakemake(tmp_path / "plan", "-n", profile="slurm", env={"LCFLOW_SLURM_CONTAINER": container},
                     timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^python -c from lcflow.train.parallel.backend_check import problem", log.read_text(), re.M)
    ranks = re.findall(r"^Shell command: env LCFLOW_RANK_USAGE=\S+ (srun --mpi=pmix [^\n]*?) lcflow -v (train|predict|tune) ",
                       done.stdout, re.M)
    assert {kind for _, kind in ranks} == {"train", "predict", "tune"}
    assert all(line.endswith(f"--cpus-per-task=12 {container}") for line, _ in ranks), ranks[:2]
    log.unlink()
    done = snakemake(tmp_path / "run", "resources/demo/corine/clc_demo_3035.tif", env={"LCFLOW_CONTAINER": container},
                     timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "run" / "resources" / "demo" / "corine" / "clc_demo_3035.tif").exists()
    assert re.search(r"^lcflow -v synth-corine --out ", log.read_text(), re.M), log.read_text()


def test_the_workflow_is_clean_under_snakemake_s_linter(tmp_path):
    """The Snakemake workflow catalog's conventions, as `snakemake --lint` checks them (make lint)."""
    done = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "--lint", "-s", str(ROOT / "Snakefile"), "-d",
                           str(tmp_path), "--configfile", str(ROOT / "config" / "config.yaml")], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "Congratulations, your workflow is in a good condition" in done.stdout + done.stderr


def _unset_demo(demo: Path) -> dict:
    """A layer over the demo config that unsets the demo, its truth and CORINE's source, reading the
    small demo's catalogue as if it were one's own."""
    return {"demo": None, "stac": {"catalog": str(demo / "catalog" / "catalog.json")},
            "aoi": {"31UFT": SMALL_AOI["31UFT"], "32ULC": SMALL_AOI["32ULC"]}, "assess": {"truth": None}}


def test_a_layered_demo_null_plans_without_the_demo(demo, tmp_path):
    """`demo: null` (with the truth unset) layered over the demo config: no synth rule, no truth, the
    catalogue and CORINE read as a user's."""
    over = tmp_path / "mine.yaml"
    over.write_text(yaml.safe_dump({**_unset_demo(demo), "labels": {"corine": str(demo / "corine" / "clc_demo_3035.tif")}}))
    done = snakemake(tmp_path, "-n", configfile=[ROOT / "config" / "config.yaml", over], timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = job_counts(done.stdout)
    assert not [rule for rule in counts if rule.startswith(("synth", "label_reference"))], counts
    assert counts["search"] == counts["cube"] == len(DEMO["tiles"]) * len(DEMO["years"])
    assert "truth" not in done.stdout


def test_own_polygons_replace_corine_by_unsetting_it(demo, tmp_path):
    """`labels: {corine: null, reference: ...}` layered over the demo config: the labels rule reads the
    polygons with their mapping."""
    from lcflow.labels import nomenclature

    from ..conftest import corine_polygons

    polygons = tmp_path / "polygons.gpkg"
    corine_polygons(demo / "corine" / "clc_demo_3035.tif", "LC").drop(columns="ID").to_file(polygons)
    level1 = nomenclature.clc_level(1)
    mapping = tmp_path / "level1.csv"
    mapping.write_text("code,class_code,class_name\n" + "".join(
        f"{code},{cls},{level1.names[cls]}\n" for code, cls in sorted(level1.mapping.items())))
    over = tmp_path / "mine.yaml"
    over.write_text(yaml.safe_dump({**_unset_demo(demo), "labels": {
        "corine": None, "reference": str(polygons), "code_column": "LC", "mapping": str(mapping)}}))
    done = snakemake(tmp_path, "-n", "-p", configfile=[ROOT / "config" / "config.yaml", over], timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert job_counts(done.stdout)["labels"] == len(DEMO["tiles"])
    labels = [line for line in done.stdout.splitlines() if "lcflow -v labels" in line]
    assert labels and all(f"--reference {polygons}" in line and f"--mapping {mapping}" in line for line in labels)
    made = snakemake(tmp_path, "results/31UFT/labels.tif", configfile=[ROOT / "config" / "config.yaml", over],
                     timeout=600)  # and the labels made for real from them: CORINE's level-1 classes
    assert made.returncode == 0, made.stderr[-3000:]
    with rasterio.open(tmp_path / "results" / "31UFT" / "labels.tif") as ds:
        classes = set(np.unique(ds.read(1)).tolist()) - {ds.nodata}
    assert classes and classes <= set(level1.names), classes
