"""A dry run is read from Snakemake's own command line, as its parser reads it."""

import pytest

from lcflow.common import dry_run


@pytest.mark.parametrize("argv, asked", [
    (["-n"], True), (["-np", "--profile", "profiles/slurm"], True), (["--dry-run"], True),
    (["-p", "--cores", "2"], False), (["--notemp", "--nolock"], False), (["--unlock"], False),
    (["--profile", "profiles/slurm", "results/accuracy.tsv"], False),
])
def test_a_dry_run_is_told_from_the_command_line(argv, asked):
    assert dry_run.asked(argv) is asked


def test_the_local_rules_of_the_workflow_are_named_sorted():
    class Rule:
        def __init__(self, name):
            self.name = name

    said = dry_run.local_rules_said([Rule("search"), Rule("cube"), Rule("all")], {"all", "search", "gone"})
    assert said.endswith(": all, search") and "not as Slurm jobs" in said
