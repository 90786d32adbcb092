"""Launch commands come from resources: bare, local Horovod, and MPI under Slurm with explicit counts."""

import pytest

from lcflow import launch
from lcflow.errors import LcflowError


def test_bare_rule_runs_one_process():
    assert launch.command({}) == "env"
    assert launch.threads_per_rank({"threads_per_rank": 2}) == 2


def test_local_launcher_is_taken_as_given():
    res = {"launcher": "horovodrun -np 2 -H localhost:2 --gloo", "threads_per_rank": 1}
    assert launch.command(res) == res["launcher"] and launch.threads_per_rank(res) == 1


def test_mpi_job_repeats_its_task_layout_to_srun():
    res = {"mpi": "srun --mpi=pmix", "nodes": 2, "tasks_per_node": 4, "cpus_per_task": 12, "launcher": "env"}
    assert launch.command(res) == "srun --mpi=pmix --kill-on-bad-exit=1 --nodes=2 --ntasks-per-node=4 --cpus-per-task=12"
    assert launch.threads_per_rank(res) == 12
    assert launch.command({"mpi": "srun --mpi=pmix", "tasks": 3}) == "srun --mpi=pmix --kill-on-bad-exit=1 --ntasks=3"


def test_a_container_starts_each_rank_of_an_mpi_job_and_wraps_any_other_launcher():
    """The profile's CONTAINER: srun starts the image on every rank's node (the ranks meet through the
    host's PMIx); a local launcher, or one process, runs inside it whole."""
    image = "apptainer exec --nv /p/lcflow.sif"
    res = {"mpi": "srun --mpi=pmix", "nodes": 2, "tasks_per_node": 4, "cpus_per_task": 12}
    assert launch.command(res, container=image) == \
        f"srun --mpi=pmix --kill-on-bad-exit=1 --nodes=2 --ntasks-per-node=4 --cpus-per-task=12 {image}"
    assert launch.command({"ranks": 2}, container=image) == f"{image} horovodrun -np 2 -H localhost:2 --gloo"
    assert launch.command({}, container=image) == f"{image} env"


def test_a_rank_that_fails_ends_a_slurm_step_but_a_site_s_own_setting_stays():
    """srun waits for the step's other tasks when one exits with an error unless told to kill them: every
    srun launcher line says so, except where the site's MPI value already decides it."""
    assert launch.command({"mpi": "env X=1 srun --mpi=pmix", "tasks": 2}) == \
        "env X=1 srun --mpi=pmix --kill-on-bad-exit=1 --ntasks=2"
    assert launch.command({"mpi": "srun -K0 --mpi=pmix", "tasks": 2}) == "srun -K0 --mpi=pmix --ntasks=2"
    assert launch.command({"mpi": "mpirun", "tasks": 2}) == "mpirun --ntasks=2"


@pytest.mark.parametrize("res", [{"mpi": "srun"}, {"mpi": "srun", "tasks": 2, "tasks_per_node": 2}])
def test_mpi_job_without_one_task_count_is_refused(res):
    with pytest.raises(LcflowError, match="rule train: an mpi job needs exactly one of"):
        launch.command(res)


def test_the_program_a_launcher_starts_is_its_first_word_after_env():
    assert launch.program("horovodrun -np 2 -H localhost:2 --gloo") == "horovodrun"
    assert launch.program("env OMPI_MCA_mpi_yield_when_idle=1 srun --mpi=pmix") == "srun"
    assert launch.program("env") is None
    assert launch.program("'/opt/my tools/mpirun' -np 4") == "/opt/my tools/mpirun"


def test_missing_programs_are_named_once_in_order(tmp_path):
    tool = tmp_path / "horovodrun"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    lines = ["horovodrun -np 2", "env X=1 no-such-srun --mpi=pmix", "env", "no-such-srun -n 2", "lcflow-nowhere"]
    assert launch.missing_programs(lines, str(tmp_path)) == ["no-such-srun", "lcflow-nowhere"]
    assert launch.missing_programs(lines[:1], "/nonexistent") == ["horovodrun"]


def test_the_launchers_a_profile_sets_are_read_from_its_resources():
    class Parsed:  # Snakemake's parsed resource: the profile's text in raw
        def __init__(self, raw):
            self.raw = raw

    by_rule = {"train": {"launcher": "horovodrun -np 2", "threads_per_rank": 1},
               "predict": {"mpi": Parsed("srun --mpi=pmix"), "nodes": Parsed(2)}, "cube": {"mem_mb": 12000}}
    assert launch.configured_launchers(by_rule) == ["horovodrun -np 2", "srun --mpi=pmix"]


@pytest.mark.parametrize("backend, expected", [
    ("horovod", "horovodrun -np 3 -H localhost:3 --gloo"),
    ("torch", "torchrun --standalone --nnodes=1 --nproc-per-node=3 --no-python")])
def test_a_number_of_ranks_starts_the_backends_own_launcher(backend, expected):
    assert launch.command({"ranks": 3}, backend=backend) == expected
    assert launch.command({"ranks": 1}, backend=backend) == "env"  # one rank: no launcher at all
    # a launcher command line, or an MPI job, is taken whatever the backend
    assert launch.command({"ranks": 3, "launcher": "mpirun -np 3"}, backend=backend) == "mpirun -np 3"
    assert launch.command({"ranks": 3, "mpi": "srun", "tasks": 3}, backend=backend) == "srun --kill-on-bad-exit=1 --ntasks=3"
    by_rule = {"train": {"ranks": 3}, "hpo": {"ranks": 3, "launcher": "mpirun -np 3"}, "predict": {"ranks": 1}}
    assert launch.configured_launchers(by_rule, backend) == [expected, "mpirun -np 3"]


def test_an_unknown_backend_is_refused_naming_the_rule():
    with pytest.raises(LcflowError, match="rule predict: distributed backend 'mpi'; expected one of horovod, torch"):
        launch.command({"ranks": 2}, rule="predict", backend="mpi")


def test_given_a_usage_folder_every_rank_is_started_with_it():
    """The folder where each rank writes its own CPU time and memory (lcflow.common.rank_usage), quoted,
    before any launcher: srun passes the environment to its ranks, horovodrun and torchrun to theirs."""
    res = {"mpi": "env X=1 srun --mpi=pmix", "tasks": 2}
    line = launch.command(res, usage="results/bench marks/train/lstm.ranks")
    assert line == "env LCFLOW_RANK_USAGE='results/bench marks/train/lstm.ranks' env X=1 srun --mpi=pmix " \
                   "--kill-on-bad-exit=1 --ntasks=2"
    assert launch.program(line) == "srun" and launch.program(launch.command({}, usage="u")) is None
    assert launch.command({"ranks": 2}, usage="u") == "env LCFLOW_RANK_USAGE=u horovodrun -np 2 -H localhost:2 --gloo"
