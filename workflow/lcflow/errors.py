"""One exception type for bad user input, so the CLI can print it as one clear line."""


class LcflowError(Exception):
    """Bad input named precisely (file, tile, key or value); shown to the user without a traceback."""
