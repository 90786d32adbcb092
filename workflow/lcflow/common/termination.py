"""SIGTERM (Slurm's scancel and time limit, Snakemake cancelling a job) ends a command, whatever it is doing.

Python runs a signal handler only between bytecodes of the main thread, so a rank blocked in a collective
(a C++ call waiting for a rank that is gone) would never see it. The handler here unwinds the command as
an error does (its staging goes); a watcher thread, woken by the signal itself (``signal.set_wakeup_fd``),
ends the process after a grace period if the main thread has not unwound by then.
"""

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

#: how long the main thread is given to unwind after SIGTERM before the process ends itself; under Slurm's
#: default KillWait of 30 s before SIGKILL
GRACE_S = 10.0


def rank_named() -> str:
    """`` (rank 1 on n2)`` where a parallel launcher started this process, else nothing: which of a job's
    ranks a line is from."""
    import platform

    from lcflow.common.path_guard import launched_rank

    rank = launched_rank()
    return "" if rank is None else f" (rank {rank} on {platform.node()})"


def _unwind(signum, frame):
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def ended_by_sigterm(what: str, grace_s: float = GRACE_S) -> Iterator[None]:
    """Within the block, SIGTERM unwinds like an error, and ends the process ``grace_s`` later at most.
    Outside the main thread (a test's worker) the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read, write = os.pipe()
    os.set_blocking(write, False)
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                got = os.read(read, 64)
            except OSError:
                return
            if not got or done.is_set():
                return
            if signal.SIGTERM in got and not done.wait(grace_s):
                print(
                    f"lcflow {what}: error: stopped by SIGTERM{rank_named()} while blocked (in a collective, or "
                    f"a read that does not return); ended after {grace_s:g} s",
                    file=sys.stderr,
                    flush=True,
                )
                os._exit(128 + signal.SIGTERM)

    previous_handler = signal.signal(signal.SIGTERM, _unwind)
    previous_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    watcher = threading.Thread(target=watch, name="sigterm-watcher", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGTERM, previous_handler)
        os.close(write)  # the watcher's read returns
        watcher.join(timeout=5)
        os.close(read)
