"""The files a study directory holds, named once: the workers share them, and no command may write over them."""

from pathlib import Path

#: Optuna's journal of every trial (with its lock file beside it)
JOURNAL = "journal.log"
#: the lock under which a worker claims a trial
CLAIM = "claim"
#: one file a running trial, touched while it runs
HEARTBEAT_DIR = "heartbeats"
#: one lock a worker id, held while that worker runs (two workers of one id would fail each other's trials)
WORKERS_DIR = "worker_locks"
#: the deep trials' checkpoints, the best complete one kept for the final training
CHECKPOINTS = "checkpoints"
#: what the workers read and write in a study directory (outputs such as best_params.yaml may sit beside)
MEMBERS = (
    JOURNAL,
    f"{JOURNAL}.lock",
    CLAIM,
    f"{CLAIM}.lock",
    HEARTBEAT_DIR,
    WORKERS_DIR,
    CHECKPOINTS,
)


def trial_checkpoint(study_dir: Path, study_name: str, number: int) -> Path:
    """Where a deep trial's run keeps its checkpoint (the final training's checkpoint, in form and fingerprint)."""
    return Path(study_dir) / CHECKPOINTS / f"{study_name}-{number}.pt"
