"""Text in figures: class names shown whole, on as many lines as they need."""

import textwrap


def wrapped(label: str, width: int = 22) -> str:
    """``label`` on lines of about ``width`` characters (a tick label of a class: its code and whole name)."""
    return "\n".join(textwrap.wrap(label, width)) or label
