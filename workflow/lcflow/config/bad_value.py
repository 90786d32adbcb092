"""The error of a config check that found a value at fault: where it is, and what is wrong with it."""

from collections.abc import Sequence


class BadValue(Exception):
    """A config value at fault: its key path and the message."""

    def __init__(self, path: Sequence[str | int], message: str):
        super().__init__(message)
        self.path, self.message = tuple(path), message
