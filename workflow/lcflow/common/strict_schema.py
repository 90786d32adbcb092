"""JSON Schema as lcflow checks its config and settings with: an integer is a whole number written as one,
a number is finite.

JSON Schema takes 2018.0 for an integer and NaN for a number, and NaN passes every bound (every comparison
with it is false): a year of 2018.0 names no file, a ``min_clear_fraction`` of NaN floors nothing.
"""

import functools
import math
from typing import Any


@functools.cache
def _strict_class():
    import jsonschema  # here: every lcflow command imports its callers, few check a schema

    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine(
        "integer", lambda _, v: isinstance(v, int) and not isinstance(v, bool)
    ).redefine(
        "number",
        lambda _, v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v),
    )
    return jsonschema.validators.extend(base, type_checker=checker)


def validator(schema: dict[str, Any]):
    """A Draft 2020-12 validator of ``schema`` with lcflow's integers and numbers."""
    return _strict_class()(schema)
