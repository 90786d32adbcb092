"""The Slurm profile's site values read as data: numbers whole and bounded, no shell text where a value
reaches a command line, JOB_SETUP parsed before anything is queued (lcflow.site_values)."""

import pytest

from lcflow import site_values
from lcflow.budget import cluster
from lcflow.errors import LcflowError

from ..conftest import ROOT


@pytest.mark.parametrize("name, text, said", [
    ("SBATCH_EXTRA", "--comment=$(touch /tmp/x)", "holds '$' '(' ')', which a shell would run or expand"),
    ("SBATCH_EXTRA", "--hint=nomultithread; rm -rf ~", "holds ';' '~', which a shell would run or expand"),
    ("CONTAINER", "apptainer exec `id` /p/lcflow.sif", "holds '`', which a shell would run or expand"),
    ("MPI", "srun --mpi=pmix | tee", "holds '|', which a shell would run or expand"),
    ("ACCOUNT", "proj\nsleep 9", "holds '\\n', which a shell would run or expand"),
    ("JOB_SETUP", "module load GCC; if then", "not shell bash can parse (line 1: syntax error near unexpected token"),
    ("GPUS_PER_NODE", "four", "not a whole number in [0, 64]"),
    ("CPU_CORES", "-8", "not a whole number in [1, 4096]"),
    ("TRAIN_NODES", "0", "not a whole number in [1, 10000]"),
    ("STATUS_COMMAND", "sacct; id", "one of sacct, squeue"),
])
def test_a_bad_site_value_is_refused_in_one_line_naming_it(name, text, said):
    with pytest.raises(LcflowError) as refused:
        site_values.check(name, text)
    line = str(refused.value)
    assert line.startswith(f"site value {name}={text!r} (LCFLOW_SLURM_{name}, or SITE VALUES in "
                           "profiles/slurm/config.yaml): ") and said in line and "\n" not in line, line


@pytest.mark.parametrize("name, text", [
    ("SBATCH_EXTRA", "--hint=nomultithread --mail-type=FAIL --mail-user=ann@example.org --exclude=jwb[0001-0010]"),
    ("CONTAINER", "apptainer exec --nv --bind /p/scratch:/scratch /p/project/x/lcflow.sif"),
    ("MPI", "env OMPI_MCA_mpi_yield_when_idle=1 srun --mpi=pmix"),
    ("GPU_CONSTRAINT", "a100&ib|(h100*2)"),
    ("JOB_SETUP", 'module load Stages/2025 GCC OpenMPI; export NCCL_SOCKET_IFNAME=ib0; [ -d "$HOME" ] && cd "$HOME"'),
])
def test_what_sites_write_is_taken(name, text):
    assert site_values.check(name, text) == text


def test_the_profile_reads_every_value_through_site_and_the_budget_holds_it_to_the_same_bounds(monkeypatch):
    text = (ROOT / "profiles" / "slurm" / "config.yaml").read_text()
    assert "from lcflow.site_values import site" in text and "int(site(" not in text
    names = set(cluster.site_values(ROOT / "profiles" / "slurm"))
    assert set(site_values.NUMBERS) - {"TASKS_PER_NODE"} <= names
    monkeypatch.setenv("LCFLOW_SLURM_CPU_CORES", "-8")
    with pytest.raises(LcflowError, match=r"site value CPU_CORES='-8' .*: not a whole number in \[1, 4096\]"):
        cluster.from_profile(ROOT / "profiles" / "slurm", 8, 4)
    monkeypatch.setenv("LCFLOW_SLURM_CPU_CORES", "8")
    assert cluster.from_profile(ROOT / "profiles" / "slurm", 8, 4).cpu_job_cores == 8


def test_values_from_a_profile_of_the_site_s_own_are_checked_where_snakemake_starts():
    env = {"LCFLOW_CONTAINER": "apptainer exec x.sif", "LCFLOW_JOB_SETUP": "module load GCC"}
    site_values.check_job_values(env, ["srun --mpi=pmix"], ["'--hint=nomultithread'", "\"--hint=x '--exclude=jwb[01]'\""])
    for env, launchers, extras, said in [
        ({"LCFLOW_CONTAINER": "x $(id)"}, [], [], "site value CONTAINER="),
        ({"LCFLOW_JOB_SETUP": "fi"}, [], [], "site value JOB_SETUP="),
        ({}, ["srun `id`"], [], "site value MPI="),
        ({}, [], ["'--comment=$(id)'"], "slurm_extra '--comment=$(id)': the Slurm executor passes it to a shell"),
    ]:
        with pytest.raises(LcflowError, match=said.replace("$", r"\$").replace("(", r"\(").replace(")", r"\)")):
            site_values.check_job_values(env, launchers, extras)
