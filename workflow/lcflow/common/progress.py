"""Progress of long work in the log: how much is done, at what rate, and how long is left."""

import logging
import time


class Progress:
    """Counts units of work (windows, pixels) and logs a line every ``every`` seconds and at the end."""

    def __init__(
        self, log: logging.Logger, what: str, total: int, unit: str = "px", every: float = 30.0
    ):
        self.log, self.what, self.total, self.unit, self.every = log, what, total, unit, every
        self.started = self.last = time.monotonic()
        self.steps = self.amount = 0

    def add(self, steps: int, total_steps: int, amount: int) -> None:
        """``steps`` more done of ``total_steps`` (windows), covering ``amount`` more units (pixels)."""
        self.steps += steps
        self.amount += amount
        now = time.monotonic()
        if now - self.last >= self.every or self.steps >= total_steps:
            self.last = now
            elapsed = max(now - self.started, 1e-9)
            rate = self.amount / elapsed
            left = (self.total - self.amount) / rate if rate > 0 else float("inf")
            self.log.info(
                "%s: %d/%d windows, %.0f %s/s, %s elapsed, %s left",
                self.what,
                self.steps,
                total_steps,
                rate,
                self.unit,
                duration(elapsed),
                duration(left),
            )


def duration(seconds: float) -> str:
    """``1h02m03s``, ``4m05s``, ``6s``; ``?`` for an unknown time."""
    if seconds == float("inf"):
        return "?"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def amount(n_bytes: float) -> str:
    """``25.0 kB``, ``3.4 MB``, ``1.20 GB``, ``0.51 TB`` (SI units, as file sizes and quotas are given)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n_bytes) >= size:
            return f"{n_bytes / size:.2f} {unit}" if size >= 1e9 else f"{n_bytes / size:.1f} {unit}"
    return f"{int(n_bytes)} B"


def training_round(row: dict, rounds: int, seconds: float, done: int) -> str:
    """The log line of a training round: how far, the training loss and accuracy, the validation accuracy,
    the rate and the time left at the pace of the ``done`` rounds that took ``seconds``."""
    val = f", val accuracy {row['val_accuracy']:.4f}" if "val_accuracy" in row else ""
    left = seconds / max(done, 1) * (rounds - row["round"])
    return (
        f"round {row['round']}/{rounds}: loss {row['loss']:.4f}, accuracy {row['accuracy']:.4f}{val}, "
        f"{row['samples_per_s']:.0f} samples/s, {duration(left)} left"
    )
