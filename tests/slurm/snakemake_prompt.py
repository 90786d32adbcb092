"""``snakemake``, with the Slurm executor's status checks at most ``LCFLOW_TEST_STATUS_CHECK_S`` seconds
apart (default 2) and the cluster's ``MinJobAge`` read once: the command line the Slurm tests run instead
of ``snakemake``.

The executor plugin waits 10 s longer before each status check that finds no job ended, up to 180 s, to
spare a busy cluster's slurmctld. On the test cluster, whose jobs take seconds to minutes, that wait is
most of the run: a job that ends while the executor sleeps for 90 s holds up everything after it.

Before every check the plugin (2.8) also asks ``scontrol show config`` for ``MinJobAge``, within 10 s, and
where it gets no answer it checks with ``sacct`` instead of the ``squeue`` the profile chose. The test
cluster has no accounting database: ``sacct`` reports no job, and a job that ended in such a check is never
seen to end (a run of the whole suite hung so, its jobs done, its slurmctld busy for a moment). MinJobAge is
the cluster's configuration, fixed while slurmctld runs, so it is read once, with retries, and kept.
Only the pause between checks and that read change; the checks, the profile and the jobs are those of a
real run.
"""

import os
import sys
import time

import snakemake_executor_plugin_slurm as slurm
from snakemake.cli import main

CAP_S = float(os.environ.get("LCFLOW_TEST_STATUS_CHECK_S", "2"))
_check_active_jobs = slurm.Executor.check_active_jobs
_get_min_job_age = getattr(slurm, "get_min_job_age", None)  # 2.8's per-check read; later 2.x may differ
_min_job_age: list[int] = []


def get_min_job_age(attempts: int = 6, pause_s: float = 5.0) -> int | None:
    """The plugin's read of MinJobAge, kept once it has answered (tried ``attempts`` times until then)."""
    if not _min_job_age:
        for _ in range(attempts):
            value = _get_min_job_age()
            if value is not None:
                _min_job_age.append(value)
                break
            time.sleep(pause_s)
        else:
            return None
    return _min_job_age[0]


async def check_active_jobs(self, active_jobs):
    """The plugin's check, then its next pause cut to CAP_S."""
    async for job in _check_active_jobs(self, active_jobs):
        yield job
    self.next_seconds_between_status_checks = min(self.next_seconds_between_status_checks, CAP_S)


slurm.Executor.check_active_jobs = check_active_jobs
if _get_min_job_age is not None:
    slurm.get_min_job_age = get_min_job_age

if __name__ == "__main__":
    sys.exit(main())
