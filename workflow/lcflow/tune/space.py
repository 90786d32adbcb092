"""Search spaces of hyperparameter optimisation: which parameters a study varies, and over what.

A space maps parameter names of one model (the tables of :mod:`lcflow.train.models.hyperparameters`) to a range or a list:

    learning_rate: {low: 0.0003, high: 0.01, log: true}
    hidden_size: {low: 32, high: 256, log: true}    # an int parameter: integers are drawn
    optimizer: {choices: [adamw, lamb]}

The parameter's own type decides how it is drawn (``int`` parameters give integers), and every bound
and choice is checked against the parameter's accepted values, so a space cannot propose a value that
``lcflow train`` would refuse. This module imports no Optuna: the workflow checks spaces at start-up.
"""

from typing import Any

from lcflow.train.models import hyperparameters
from lcflow.train.models.hyperparameters import ParamError
from lcflow.train.models.param import Param

#: the class weighting, searched by every model's study: in a deep model's loss it trades overall for
#: balanced accuracy (on the whole Slovenia table, without weights instead of sqrt, tempcnn and ltae gained
#: 0.020 and 0.018 overall accuracy, -0.003 to +0.062 a fold, and lost 0.14 and 0.20 balanced accuracy;
#: docs/benchmarks.md), so the study's metric (hpo.metric) picks it for the table at hand
CLASS_WEIGHTING = {
    "class_weight": {"choices": list(hyperparameters.TRAINING["class_weight"].choices)}
}

#: what a study varies when the config names no space: the recipe's sensitive knobs and the network's size
DEFAULT_SPACES: dict[str, dict[str, dict[str, Any]]] = {
    "rf": {
        "n_estimators": {"low": 100, "high": 800, "log": True},
        "max_features": {"choices": ["sqrt", "log2", 0.3]},
        "min_samples_leaf": {"low": 1, "high": 8},
        **CLASS_WEIGHTING,
    },
    "lstm": {
        "learning_rate": {"low": 3e-4, "high": 1e-2, "log": True},
        "weight_decay": {"low": 1e-4, "high": 0.1, "log": True},
        "warmup_fraction": {"low": 0.0, "high": 0.2},
        "hidden_size": {"low": 32, "high": 128, "log": True},
        "num_layers": {"low": 1, "high": 3},
        "dropout": {"low": 0.1, "high": 0.6},
        "bidirectional": {"choices": [True, False]},
        # flatten (the default) keeps each step's date for the classifier and gained 0.016 over mean_last on the
        # six 500-row cases (three seeds), yet lost up to 0.016 on a case at one seed and 0.001 on a whole-table
        # fold: where the classes' timing shifts between fields, pooling over time may suit the table better
        "pooling": {"choices": ["flatten", "mean_last"]},
        **CLASS_WEIGHTING,
    },
    "tempcnn": {
        "learning_rate": {"low": 3e-4, "high": 1e-2, "log": True},
        "weight_decay": {"low": 1e-4, "high": 0.1, "log": True},
        "warmup_fraction": {"low": 0.0, "high": 0.2},
        "filters": {"low": 16, "high": 128, "log": True},
        "kernel_size": {"choices": [3, 5, 7]},
        "dropout": {"low": 0.1, "high": 0.5},
        **CLASS_WEIGHTING,
    },
    "ltae": {
        "learning_rate": {"low": 3e-4, "high": 1e-2, "log": True},
        "weight_decay": {"low": 1e-4, "high": 0.1, "log": True},
        "warmup_fraction": {"low": 0.0, "high": 0.2},
        "heads": {"choices": [4, 8, 16]},
        "head_width": {"choices": [4, 8, 16]},
        "dropout": {"low": 0.0, "high": 0.5},
        **CLASS_WEIGHTING,
    },
    "presto": {
        "learning_rate": {"low": 1e-4, "high": 3e-3, "log": True},
        "weight_decay": {"low": 1e-4, "high": 0.1, "log": True},
        "warmup_fraction": {"low": 0.0, "high": 0.2},
        "dropout": {"low": 0.0, "high": 0.3},
        "freeze_encoder": {"choices": [False, True]},
        **CLASS_WEIGHTING,
    },
    "resnet": {
        "learning_rate": {"low": 3e-4, "high": 1e-2, "log": True},
        "weight_decay": {"low": 1e-4, "high": 0.1, "log": True},
        "channels": {"low": 16, "high": 128, "log": True},
        "dropout": {"low": 0.0, "high": 0.5},
        **CLASS_WEIGHTING,
    },
}

#: parameters that say how a job runs, not what it learns: never searched
NOT_SEARCHED = (
    "threads",
    "n_jobs",
    "predict_engine",
    "seed",
    "elastic",
    "amp",
    "fp16_allreduce",
    "val_fraction",
)


class Dimension:
    """One searched parameter: a numeric range (``low``/``high``, ``log``, ``step``) or ``choices``."""

    def __init__(
        self,
        name: str,
        kind: str,
        low: float | None = None,
        high: float | None = None,
        log: bool = False,
        step: float | None = None,
        choices: tuple | None = None,
    ):
        self.name, self.kind, self.low, self.high, self.log, self.step = (
            name,
            kind,
            low,
            high,
            log,
            step,
        )
        self.choices = choices

    def suggest(self, trial) -> Any:
        """Draw this parameter's value for an Optuna trial."""
        if self.choices is not None:
            return trial.suggest_categorical(self.name, list(self.choices))
        if self.low is None or self.high is None:
            raise ValueError(f"{self.name}: a numeric dimension needs low and high")
        if self.kind == "int":
            return trial.suggest_int(
                self.name, int(self.low), int(self.high), log=self.log, step=int(self.step or 1)
            )
        return trial.suggest_float(
            self.name, float(self.low), float(self.high), log=self.log, step=self.step
        )

    def describe(self) -> str:
        if self.choices is not None:
            return f"{self.name} in {list(self.choices)}"
        return f"{self.name} {self.kind} [{self.low:g}, {self.high:g}]{' log' if self.log else ''}"


def parse(model: str, space: dict[str, Any] | None, where: str | None = None) -> list[Dimension]:
    """The space of ``model`` (its default when ``space`` is None), every entry checked; ParamError names
    the first bad one as ``<where>.<param>``."""
    where = where or f"hpo.space.{model}"
    table = hyperparameters.table(model)
    space = DEFAULT_SPACES.get(model, {}) if space is None else space
    if not isinstance(space, dict) or not space:
        raise ParamError(f"{where}: expected a mapping of parameter names to ranges, got {space!r}")
    dims = []
    for name, spec in space.items():
        at = f"{where}.{name}"
        if name not in table:
            raise ParamError(
                f"{at}: unknown parameter {name!r} for model {model}; known: {', '.join(table)}",
                name,
            )
        if name == "refit":
            raise ParamError(
                f"{at}: refit trains on the val rows that score a trial, so trials cannot compare it; "
                "set it in model_params for the final model",
                name,
            )
        if name in NOT_SEARCHED:
            raise ParamError(
                f"{at}: {name} says how a job runs, not what it learns, and is not searched", name
            )
        dims.append(_dimension(name, table[name], spec, at))
    return dims


def _dimension(name: str, param: Param, spec: Any, at: str) -> Dimension:
    if not isinstance(spec, dict):
        raise ParamError(
            f"{at} = {spec!r}: expected {{low: .., high: ..}} or {{choices: [..]}}", name
        )
    keys = set(spec)
    if "choices" in keys:
        if keys - {"choices"}:
            raise ParamError(
                f"{at}: choices cannot be combined with {sorted(keys - {'choices'})}", name
            )
        values = spec["choices"]
        if not isinstance(values, list) or not values:
            raise ParamError(f"{at}.choices = {values!r}: expected a non-empty list", name)
        checked = []
        for value in values:
            try:
                checked.append(param.coerce(value))
            except ValueError as exc:
                raise ParamError(
                    f"{at}.choices: {value!r} is not a value of {name} (expected {exc})", name
                ) from None
        if len(set(map(repr, checked))) < len(checked):
            raise ParamError(f"{at}.choices = {values!r}: a value is listed twice", name)
        return Dimension(name, param.kind, choices=tuple(checked))
    unknown = keys - {"low", "high", "log", "step"}
    if unknown or not {"low", "high"} <= keys:
        raise ParamError(
            f"{at} = {spec!r}: expected low and high (and optionally log, step), or choices", name
        )
    if param.kind not in ("int", "float") or param.choices:
        raise ParamError(f"{at}: {name} is not a number; give choices instead of low/high", name)
    bounds = []
    for key in ("low", "high"):
        try:
            bounds.append(param.coerce(spec[key]))
        except ValueError as exc:
            raise ParamError(f"{at}.{key} = {spec[key]!r}: expected {exc}", name) from None
    low, high = bounds
    if low is None or high is None or low > high:
        raise ParamError(f"{at}: low = {spec['low']!r} is above high = {spec['high']!r}", name)
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise ParamError(f"{at}.log = {log!r}: expected true or false", name)
    if log and low <= 0:
        raise ParamError(f"{at}: a log range needs low > 0, got low = {low!r}", name)
    step = spec.get("step")
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, (int, float)) or step <= 0:
            raise ParamError(f"{at}.step = {step!r}: expected a number > 0", name)
        if log:
            raise ParamError(f"{at}: step and log cannot be combined", name)
        if param.kind == "int" and not float(step).is_integer():
            raise ParamError(f"{at}.step = {step!r}: {name} is an integer, so is its step", name)
    return Dimension(name, param.kind, low, high, log, step)
