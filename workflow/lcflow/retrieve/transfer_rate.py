"""A stage-in's progress: files and bytes staged so far, the rate and the time left, logged as it goes."""

import logging
import threading
import time

from lcflow.common.progress import amount, duration

log = logging.getLogger("lcflow")


class Rate:
    """Files and bytes staged so far, logged every ``every`` seconds and at the end: rate and time left."""

    def __init__(self, what: str, files: int, total_bytes: int, every: float = 30.0):
        self.what, self.files, self.total, self.every = what, files, total_bytes, every
        self.started = self.last = time.monotonic()
        self.done_files = self.done_bytes = self.received = 0
        self._lock = threading.Lock()

    def add(self, received: int, finished: int = 0, counted: int = 0) -> None:
        """``received`` bytes more over the network; ``finished`` files done, ``counted`` bytes of them
        already on disk before this run."""
        with self._lock:
            self.received += received
            self.done_bytes += received + counted
            self.done_files += finished
            now = time.monotonic()
            if now - self.last >= self.every or self.done_files >= self.files:
                self.last = now
                self.log(now)

    def log(self, now: float) -> None:
        elapsed = max(now - self.started, 1e-9)
        rate = self.received / elapsed
        left = (
            0.0
            if self.done_files >= self.files
            else (max(0, self.total - self.done_bytes) / rate if rate > 0 else float("inf"))
        )
        log.info(
            "%s: %d/%d files, %s of %s, %s, %s elapsed, %s left",
            self.what,
            self.done_files,
            self.files,
            amount(self.done_bytes),
            amount(self.total),
            f"{amount(rate)}/s" if self.received else "nothing received (on disk before this run)",
            duration(elapsed),
            duration(left),
        )
