"""Model parameters: name, type, range and default of each, per model, checked in one place.

The same tables serve the config check (before any job runs), ``lcflow train --set`` and the help
texts, so a parameter refused by one is refused by all. This module imports no deep-learning code:
the workflow checks its config with it at start-up.
"""

import json
from pathlib import Path
from typing import Any

import yaml

from lcflow.errors import LcflowError
from lcflow.train.models.param import Param, bool_param, choice_param, float_param, int_param

RF: dict[str, Param] = {
    "n_estimators": int_param(
        300, "trees in the forest (at most 10000: more add memory, not accuracy)", 1, 10000
    ),
    "max_depth": int_param(
        None, "deepest split of a tree (null: grow until leaves are pure)", 1, 1000, nullable=True
    ),
    "min_samples_leaf": int_param(1, "fewest samples in a leaf", 1, 1000000),
    "max_features": choice_param(
        "sqrt",
        "features tried per split: sqrt, log2, a share in (0, 1] or a count",
        "sqrt",
        "log2",
        nullable=True,
        also=(
            int_param(None, "", 1, 100000, exact=True),
            float_param(None, "", 0, 1, low_open=True, exact=True),
        ),
    ),
    "criterion": choice_param("gini", "split quality", "gini", "entropy", "log_loss"),
    "class_weight": choice_param(
        "sqrt",
        "weight of each class in the trees: none, sqrt (square root of balanced) or "
        "balanced (inverse frequency)",
        "none",
        "sqrt",
        "balanced",
    ),
    "n_jobs": int_param(-1, "CPU cores (-1: all)", -1, 4096),
    "seed": int_param(42, "random seed (32 bits)", 0, 2**32 - 1),
    "predict_engine": choice_param(
        "compiled",
        "what computes a map's probabilities: compiled (lcflow's traversal of the "
        "same trees, the same probabilities, faster), tensors (the same traversal as torch "
        "tensors on the job's GPU, the same probabilities) or scikit-learn (its predict_proba)",
        "compiled",
        "tensors",
        "scikit-learn",
    ),
}

#: Every number has an upper bound a real run stays far below (a value past it is a typo or a unit
#: mistake that would fail, or run for days, later): layers, widths and batches by what fits a GPU's memory,
#: steps and rounds by what a run can take, seeds by numpy's 32 bits.

#: how every deep model is trained (lcflow.train.loop.deep)
TRAINING: dict[str, Param] = {
    "epochs": int_param(
        40, "passes over the training samples (more on a small table: see min_steps)", 1, 10000
    ),
    "min_steps": int_param(
        1000,
        "optimizer steps at least, whatever the table size (small tables train to convergence)",
        0,
        10_000_000,
    ),
    "batch_size": int_param(
        128, "samples per step and worker; the global batch is this x workers", 1, 65536
    ),
    "learning_rate": float_param(
        0.003,
        "rate for lr_reference_batch samples per step, scaled to the global batch",
        0,
        10,
        low_open=True,
    ),
    "lr_reference_batch": int_param(
        256, "global batch at which learning_rate applies unscaled", 1, 1048576
    ),
    "warmup_fraction": float_param(
        0.05, "share of the steps over which the rate warms up linearly", 0, 1
    ),
    "optimizer": choice_param(
        "adamw", "adamw, sgd (momentum) or lamb (large global batches)", "adamw", "sgd", "lamb"
    ),
    "momentum": float_param(0.9, "momentum of sgd", 0, 1, high_open=True),
    "weight_decay": float_param(0.01, "decoupled weight decay", 0, 1),
    "evaluations": int_param(
        40,
        "rounds the run is cut into; validation, checkpoint and early stopping after each",
        1,
        10000,
    ),
    "patience": int_param(
        10, "rounds without a better validation accuracy before stopping", 1, 10000
    ),
    "class_weight": choice_param(
        "sqrt",
        "weight of each class in the loss: none, sqrt (square root of balanced) or "
        "balanced (inverse frequency)",
        "none",
        "sqrt",
        "balanced",
    ),
    "weight_correction": float_param(
        0.0,
        "exponent of the loss's class weights divided out of the predicted "
        "probabilities: the map decides as if trained without class_weight (0: as trained); "
        "trades balanced for overall accuracy",
        0,
        1,
    ),
    "label_smoothing": float_param(
        0.1,
        "share of each target spread over the other classes (calmer on noisy labels)",
        0,
        1,
        high_open=True,
    ),
    "input_noise": float_param(
        0.2,
        "standard deviation of Gaussian noise added to the standardised training inputs "
        "(an augmentation for small tables)",
        0,
        10,
    ),
    "mixup": float_param(
        0.0,
        "alpha of mixup's Beta(alpha, alpha): each batch trains on a blend of its samples and "
        "their targets (0: off)",
        0,
        10,
    ),
    "drop_observations": float_param(
        0.0,
        "share of each training series' observed steps hidden at random in every batch "
        "and filled again from the others (an augmentation for cloudy series; 0: off)",
        0,
        0.9,
    ),
    "weight_ema": float_param(
        0.0,
        "decay a step of an exponential moving average of the weights, which each round "
        "validates and the model keeps (0: off; 0.99 averages about the last 100 steps)",
        0,
        1,
        high_open=True,
    ),
    "select_by": choice_param(
        "accuracy",
        "what picks the round whose weights the run keeps, and what patience waits "
        "for: val accuracy (ties: the lower loss) or val loss",
        "accuracy",
        "loss",
    ),
    "distill": float_param(
        0.0,
        "share of each training target taken from a Random Forest's out-of-fold class "
        "probabilities for the row instead of its label (a forest as the network's teacher; 0: off)",
        0,
        1,
    ),
    "val_fraction": float_param(
        0.2,
        "share of the training rows set aside for validation when the table has no "
        "val rows (stratified, in spatial blocks where x/y or row/col are given)",
        0,
        0.5,
        low_open=True,
    ),
    "refit": bool_param(
        False,
        "after the run selects its round on the val rows, train afresh on the train and val "
        "rows together for as many passes, and keep the last weights (twice the training)",
    ),
    "seed": int_param(42, "seed of weights, shuffling and dropout (32 bits)", 0, 2**32 - 1),
    "threads": int_param(0, "torch threads per worker (0: torch's default)", 0, 1024),
    "fp16_allreduce": bool_param(False, "compress gradients to float16 for the allreduce"),
    "amp": bool_param(
        False,
        "bfloat16 autocast in training (GPU, or CPU where the network runs so: else float32, "
        "with a warning)",
    ),
    "elastic": bool_param(
        False, "Horovod elastic: survive workers leaving (horovodrun --min-np/--max-np)"
    ),
}


def _dropout(default: float) -> Param:
    return float_param(default, "dropout probability", 0, 1, high_open=True)


LSTM: dict[str, Param] = {
    "hidden_size": int_param(64, "LSTM units per layer and direction", 1, 4096),
    "num_layers": int_param(2, "stacked LSTM layers", 1, 16),
    "bidirectional": bool_param(True, "read the series both ways"),
    "dropout": _dropout(0.5),  # recurrent stacks overfit small tables first
    "pooling": choice_param(
        "flatten",
        "how the outputs over time become one vector: flatten (every step's output in "
        "its place), mean_last (their mean plus the last step's), attention (a weighted sum), final "
        "(each direction's last state) or mean_final (their mean plus those states)",
        "flatten",
        "mean_last",
        "attention",
        "final",
        "mean_final",
    ),
}

TEMPCNN: dict[str, Param] = {
    "filters": int_param(64, "filters of each of the three convolutions", 1, 4096),
    "kernel_size": int_param(
        5, "convolution width in time steps (at most 73, the most steps a cube has)", 1, 73
    ),
    "dense": int_param(256, "units of the dense layer", 1, 16384),
    "dropout": _dropout(0.2),
}

RESNET: dict[str, Param] = {
    "channels": int_param(64, "channels of every residual block", 1, 4096),
    "blocks": int_param(
        2, "residual blocks; each widens the context by 2 px (at most 32: a patch of 131 px)", 0, 32
    ),
    "dropout": _dropout(0.2),
}

LTAE: dict[str, Param] = {
    "heads": int_param(
        16, "attention heads, each with its own master query and channel group", 1, 64
    ),
    "head_width": int_param(
        8, "channels of each head's group (the model width is heads x head_width)", 1, 256
    ),
    "key_size": int_param(8, "size of the keys and queries", 1, 256),
    "hidden": int_param(
        128, "units of the MLP after the attention (the classifier head has half)", 2, 4096
    ),
    "dropout": _dropout(0.2),
}

PRESTO: dict[str, Param] = {
    "pretrained": bool_param(
        True,
        "start from Presto's published encoder weights (false: the same network from random "
        "weights, to measure what pretraining buys)",
    ),
    "freeze_encoder": bool_param(
        False, "keep the encoder as published and train the classifier head only"
    ),
    # fine-tuning a pretrained transformer: a tenth of the rate the networks trained from scratch take
    "learning_rate": float_param(
        0.0003,
        "rate for lr_reference_batch samples per step, scaled to the global batch",
        0,
        10,
        low_open=True,
    ),
    "dropout": _dropout(0.1),
}

#: model name -> its parameters
MODELS: dict[str, dict[str, Param]] = {
    "rf": RF,
    "lstm": {**TRAINING, **LSTM},
    "tempcnn": {**TRAINING, **TEMPCNN},
    # patches have no observed flag to hide steps by
    "resnet": {**{k: v for k, v in TRAINING.items() if k != "drop_observations"}, **RESNET},
    "ltae": {**TRAINING, **LTAE},
    "presto": {**TRAINING, **PRESTO},
}


class ParamError(LcflowError):
    """A parameter at fault; ``key`` names it (None when the whole set is malformed)."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


def table(model: str) -> dict[str, Param]:
    if model not in MODELS:
        raise LcflowError(f"unknown model {model!r}; known: {', '.join(MODELS)}")
    return MODELS[model]


def defaults(model: str) -> dict[str, Any]:
    return {k: p.default for k, p in table(model).items()}


class CheckedParams(dict):
    """A model's full parameter set as :func:`check` returns it (defaults filled in, each value checked once):
    a model given one takes it as it is."""

    def __init__(self, values: Any = (), model: str = "") -> None:
        super().__init__(values)
        self.model = model


def check(model: str, given: dict[str, Any] | None, where: str | None = None) -> CheckedParams:
    """The full parameter set of ``model``: defaults updated with ``given``, each value checked.

    ``where`` names the source in errors (``model_params.lstm`` in the config; ``--set`` on the
    command line).
    """
    spec = table(model)
    where = where or f"model {model}"
    if given is not None and not isinstance(given, dict):
        raise ParamError(f"{where}: expected a mapping of parameter names to values, got {given!r}")
    out = defaults(model)
    for key, value in (given or {}).items():
        if key not in spec:
            raise ParamError(
                f"{where}: unknown parameter {key!r} for model {model}; known: {', '.join(spec)}",
                key,
            )
        try:
            out[key] = spec[key].coerce(value)
        except ValueError as exc:
            raise ParamError(f"{where}.{key} = {value!r}: expected {exc}", key) from None
    return CheckedParams(out, model)


def describe(model: str, skip: frozenset[str] = frozenset()) -> str:
    """One line per parameter: name, default, meaning, accepted values (for help texts); ``skip``: the
    parameters described elsewhere (the networks' shared training parameters)."""
    return "\n".join(_line(name, p) for name, p in table(model).items() if name not in skip)


def _line(name: str, p: Param) -> str:
    default = (
        "null" if p.default is None else str(p.default).lower() if p.kind == "bool" else p.default
    )
    return f"  {name} (default {default}): {p.help}; {p.expected()}"


def describe_all() -> str:
    """Every model's parameters for ``lcflow train --help``: the forest's, then the training parameters
    every network shares (once), then each network's own (and a shared one whose default it changes)."""
    lines = [
        "rf:",
        describe("rf"),
        "every network (lstm, tempcnn, resnet, ltae, presto):",
        "\n".join(_line(n, p) for n, p in TRAINING.items()),
    ]
    for model, spec in MODELS.items():
        if model == "rf":
            continue
        own = {n: p for n, p in spec.items() if n not in TRAINING or p is not TRAINING[n]}
        absent = [n for n in TRAINING if n not in spec]
        lines.append(f"{model}:" + (f" (no {', '.join(absent)})" if absent else ""))
        lines.append("\n".join(_line(n, p) for n, p in own.items()))
    return "\n".join(lines)


def read_best(path: str | Path, model: str) -> dict[str, Any]:
    """A ``best_params.yaml`` for ``model``'s training: its parameters checked, its origin kept."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise LcflowError(f"tuned parameters {path}: cannot be read ({exc})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("params"), dict):
        raise LcflowError(
            f"tuned parameters {path}: expected a mapping with 'params' (written by lcflow tune-summary)"
        )
    if doc.get("model") not in (None, model):
        raise LcflowError(f"tuned parameters {path} are of model {doc.get('model')}, not {model}")
    check(model, doc["params"], where=str(path))
    if doc.get("checkpoint"):  # the best trial's run, written beside the file (lcflow tune-summary)
        doc["checkpoint"] = str(path.parent / doc["checkpoint"])
    return {**doc, "file": str(path)}


def parse_overrides(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` strings -> dict, values parsed as YAML scalars (``3``, ``0.1``, ``true``, ``null``)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise LcflowError(f"--set {pair!r}: expected key=value")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            # not a YAML scalar: the text itself, checked against the parameter
            out[key.strip()] = value
    return out


def parse_params(text: str | None) -> dict[str, Any]:
    """``--params``: a JSON object of parameters (how the workflow passes a model's configured ones)."""
    if not text:
        return {}
    try:
        given = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LcflowError(f"--params {text[:80]!r}: not a JSON object ({exc})") from exc
    if not isinstance(given, dict):
        raise LcflowError(
            f"--params {text[:80]!r}: not a JSON object of parameter names and values"
        )
    return given
