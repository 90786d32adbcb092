"""One model parameter: its default, what it means, the values it accepts and how a given value is read as
its type (the tables of every model's parameters are :mod:`lcflow.train.models.hyperparameters`)."""

import math
from dataclasses import dataclass
from typing import Any

from lcflow.common.schema_errors import plain_number


@dataclass(frozen=True)
class Param:
    """One parameter: its default, what it means, and the values it accepts.

    ``kind`` is ``int``, ``float``, ``bool`` or ``str``; numbers may be bounded (``low``/``high``,
    inclusive unless ``low_open``/``high_open``); strings are one of ``choices``; ``nullable`` admits
    ``null``; ``also`` lists further accepted forms (``max_features``: a name, a share or a count).
    """

    default: Any
    help: str
    kind: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()
    nullable: bool = False
    also: tuple["Param", ...] = ()
    #: the number's own type must match (max_features: 1 is one feature, 1.0 all)
    exact: bool = False

    def expected(self) -> str:
        """What the parameter accepts, in words."""
        forms = [self._expected_one()] + [p._expected_one() for p in self.also]
        if self.nullable:
            forms.append("null")
        return " or ".join(forms)

    def _expected_one(self) -> str:
        if self.kind == "str":
            return "one of " + ", ".join(self.choices)
        if self.kind == "bool":
            return "true or false"
        noun = "an integer" if self.kind == "int" else "a number"
        if self.low is not None and self.high is not None:
            lo, hi = ("(" if self.low_open else "["), (")" if self.high_open else "]")
            return f"{noun} in {lo}{plain_number(self.low)}, {plain_number(self.high)}{hi}"
        if self.low is not None:
            return f"{noun} {'>' if self.low_open else '>='} {plain_number(self.low)}"
        return noun

    def coerce(self, value: Any) -> Any:
        """The value as the parameter's type; ValueError when it is none of the accepted forms."""
        if value is None and self.nullable:
            return None
        for form in (self, *self.also):
            try:
                return form._coerce_one(value)
            except ValueError:
                continue
        raise ValueError(self.expected())

    def _coerce_one(self, value: Any) -> Any:
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            raise ValueError
        if self.kind == "str":
            if isinstance(value, str) and value in self.choices:
                return value
            raise ValueError
        if isinstance(value, bool) or value is None:
            raise ValueError
        if self.exact and type(value) is not (int if self.kind == "int" else float):
            raise ValueError
        if isinstance(value, str):
            # YAML 1.1 reads 1e-3 (no dot) as a string: a number written so is still a number
            try:
                value = float(value) if self.kind == "float" else int(value)
            except ValueError:
                raise ValueError from None
        if self.kind == "int":
            if isinstance(value, float):
                if not value.is_integer():
                    raise ValueError
                value = int(value)
            if not isinstance(value, int):
                raise ValueError
        else:
            if not isinstance(value, (int, float)):
                raise ValueError
            value = float(value)
            if not math.isfinite(value):
                raise ValueError
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            raise ValueError
        if self.high is not None and (value > self.high or (self.high_open and value == self.high)):
            raise ValueError
        return value


def int_param(default, help, low=None, high=None, **kw) -> Param:
    """An integer parameter."""
    return Param(default, help, "int", low, high, **kw)


def float_param(default, help, low=None, high=None, **kw) -> Param:
    """A number parameter."""
    return Param(default, help, "float", low, high, **kw)


def bool_param(default, help) -> Param:
    """A yes-or-no parameter."""
    return Param(default, help, "bool")


def choice_param(default, help, *choices, **kw) -> Param:
    """A parameter that is one of ``choices``."""
    return Param(default, help, "str", choices=choices, **kw)
