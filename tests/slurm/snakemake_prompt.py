"""``snakemake``, with the Slurm executor's status checks at most ``LCFLOW_TEST_STATUS_CHECK_S`` seconds
apart (default 2): the command line the Slurm tests run instead of ``snakemake``.

The executor plugin waits 10 s longer before each status check that finds no job ended, up to 180 s, to
spare a busy cluster's slurmctld. On the test cluster, whose jobs take seconds to minutes, that wait is
most of the run: a job that ends while the executor sleeps for 90 s holds up everything after it. Only
the pause between checks changes; the checks, the profile and the jobs are those of a real run.
"""

import os
import sys

import snakemake_executor_plugin_slurm as slurm
from snakemake.cli import main

CAP_S = float(os.environ.get("LCFLOW_TEST_STATUS_CHECK_S", "2"))
_check_active_jobs = slurm.Executor.check_active_jobs


async def check_active_jobs(self, active_jobs):
    """The plugin's check, then its next pause cut to CAP_S."""
    async for job in _check_active_jobs(self, active_jobs):
        yield job
    self.next_seconds_between_status_checks = min(self.next_seconds_between_status_checks, CAP_S)


slurm.Executor.check_active_jobs = check_active_jobs

if __name__ == "__main__":
    sys.exit(main())
