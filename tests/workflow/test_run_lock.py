"""A controller killed with SIGKILL leaves Snakemake's lock: the dry run says so, naming --unlock and when it
is safe; after --unlock the same command runs (the recipe of docs/slurm.md, 'After the controller died')."""

import os
import signal
import subprocess
import time

from ..conftest import snakemake, snakemake_command


def test_a_killed_controller_s_lock_is_said_by_the_dry_run_and_unlock_clears_it(tmp_path):
    assert "holds a lock" not in snakemake(tmp_path, "-n", timeout=300).stderr
    cmd, env = snakemake_command(tmp_path)
    run = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    locks = tmp_path / ".snakemake" / "locks"
    try:
        deadline = time.time() + 240
        while not list(locks.glob("*.lock")) and time.time() < deadline and run.poll() is None:
            time.sleep(0.2)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    assert list(locks.glob("*.lock")), "the run never took its lock"
    dry = snakemake(tmp_path, "-n", timeout=300)
    assert dry.returncode == 0, dry.stderr[-3000:]
    (said,) = [line for line in dry.stderr.splitlines() if "holds a lock" in line]
    assert said.startswith("lcflow: warning: ") and "--unlock" in said and "squeue --me" in said
    again = snakemake(tmp_path, "--until", "synth_scenes", timeout=300)
    assert again.returncode != 0 and "LockException" in again.stdout + again.stderr
    assert snakemake(tmp_path, "--unlock", timeout=300).returncode == 0
    assert "holds a lock" not in snakemake(tmp_path, "-n", timeout=300).stderr
