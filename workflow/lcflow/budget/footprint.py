"""What a projection asks of a site beside core and GPU hours: its Slurm jobs and the login node's share
of the work (a proposal's job count; a login node's fair use), and per file system the storage and files
(a quota counts both: the stage-in stores a file a band a scene)."""

from __future__ import annotations

from dataclasses import dataclass

from lcflow.budget.projection import Row
from lcflow.budget.work import Work


@dataclass(frozen=True)
class Footprint:
    slurm_jobs: int
    gpu_jobs: int  # of them, on the GPU partition
    login_jobs: dict[str, int]  # stage -> jobs on the login node
    login_wall_h: float
    stage_gb: float
    stage_files: int
    results_gb: float

    def lines(self, stage_dir: str, results: str, login_node: bool) -> list[str]:
        """The footprint as the budget prints it below its table."""
        if login_node:
            login = ", ".join(f"{stage} {n}" for stage, n in self.login_jobs.items())
            jobs = (
                f"jobs: {self.slurm_jobs:,} Slurm jobs ({self.slurm_jobs - self.gpu_jobs:,} CPU, "
                f"{self.gpu_jobs:,} GPU); {sum(self.login_jobs.values()):,} on the login node ({login}): "
                f"{self.login_wall_h:.3g} h of its wall time, one after another at most"
            )
        else:
            jobs = f"jobs: {self.slurm_jobs + sum(self.login_jobs.values()):,}, all on this machine"
        storage = (
            f"storage: stage dir {stage_dir} (stage.dir) {self.stage_gb:.3g} GB in {self.stage_files:,} files; "
            f"results {results} {self.results_gb:.3g} GB at most (uncompressed)"
        )
        return [jobs, storage]


def of(rows: list[Row], work: Work) -> Footprint:
    """The footprint of ``rows``, projected for ``work``: a row of no cores and no GPUs is the login node's
    (the search, the stage-in where it runs there, the workflow's local rules)."""
    login = {r.stage: r.jobs for r in rows if not r.cores and not r.gpus}
    staged = 0 if work.remote else int(sum(work.scenes.values()) * work.files_a_scene)
    stage_gb = sum(r.disk_gb for r in rows if r.stage == "stage-in")
    return Footprint(
        slurm_jobs=sum(r.jobs for r in rows if r.stage not in login),
        gpu_jobs=sum(r.jobs for r in rows if r.gpus),
        login_jobs=login,
        login_wall_h=sum(r.wall_h for r in rows if r.stage in login),
        stage_gb=stage_gb,
        stage_files=staged,
        results_gb=sum(r.disk_gb for r in rows) - stage_gb,
    )
