"""The training recipe of a deep model, counted in optimizer steps so that it holds from a few hundred
samples to millions:
- the run takes ``epochs`` passes over the training samples, but at least ``min_steps`` steps: a small
  table trains to convergence, a large one is not slowed down;
- the learning rate scales with the global batch (``batch_size`` x workers), warms up linearly over
  ``warmup_fraction`` of the steps from a tenth of its peak, then decays along a cosine to zero;
- the run is cut into ``evaluations`` rounds, each validated (:mod:`lcflow.train.loop.deep` runs it);
- a refit trains as many passes over all rows as the selection run did up to its best round.
"""

import math
from dataclasses import dataclass, fields

from lcflow.errors import LcflowError
from lcflow.train.loop.optim import lr_factor, scaled_lr
from lcflow.train.models import hyperparameters
from lcflow.train.models.hyperparameters import TRAINING, CheckedParams

#: the learning rate's warm-up starts at this share of its peak
WARMUP_START = 0.1


@dataclass
class TrainConfig:
    """How a deep model is trained; names, defaults and ranges in :data:`lcflow.train.models.hyperparameters.TRAINING`."""

    epochs: int
    min_steps: int
    batch_size: int  # per worker; the global batch is batch_size x workers
    learning_rate: float  # for lr_reference_batch samples per step
    lr_reference_batch: int
    warmup_fraction: float
    optimizer: str
    momentum: float
    weight_decay: float
    evaluations: int
    patience: int
    class_weight: str
    label_smoothing: float
    input_noise: (
        float  # standard deviation of Gaussian noise on training inputs (standardised units)
    )
    mixup: float  # alpha of mixup's Beta(alpha, alpha); 0: off
    drop_observations: float  # share of observed steps hidden from each training series; 0: off
    weight_ema: float  # decay a step of the weights' moving average; 0: off
    select_by: str  # what picks the best round: val accuracy (ties: lower loss) or val loss
    distill: float  # share of the targets taken from a forest teacher's probabilities (lcflow.train.data.forest_teacher)
    val_fraction: float
    seed: int
    threads: int
    fp16_allreduce: bool
    amp: bool  # bfloat16 autocast of the training steps, on GPU or CPU
    elastic: bool  # hvd.elastic: survive workers leaving (launch with horovodrun --min-np/--max-np)

    @classmethod
    def from_params(cls, given: CheckedParams) -> "TrainConfig":
        """From a model's parameters, as :func:`lcflow.train.models.hyperparameters.check` returns them (every one
        given, checked, defaults filled in). A part of the recipe the model has no parameter for (patches
        have no observed steps to drop) takes the recipe's own value, the one its table gives."""
        table = hyperparameters.table(given.model) if getattr(given, "model", "") else TRAINING
        return cls(
            **{
                f.name: given[f.name] if f.name in table else TRAINING[f.name].default
                for f in fields(cls)
            }
        )


@dataclass(frozen=True)
class Schedule:
    """The run in steps, fixed when it starts (an elastic run keeps it when workers come and go)."""

    total_steps: int
    round_steps: int
    warmup_steps: int
    steps_per_epoch: int
    global_batch: int
    floored: bool = False  # the run is min_steps long, more than its epochs' passes

    @classmethod
    def plan(
        cls, cfg: TrainConfig, n_train: int, size: int, steps: int | None = None
    ) -> "Schedule":
        """The schedule of ``cfg`` on ``n_train`` samples and ``size`` workers; ``steps``, when given, is
        the run's length instead of epochs and min_steps (a refit's)."""
        global_batch = cfg.batch_size * size
        per_epoch = max(1, math.ceil(n_train / global_batch))
        total = (
            max(1, int(steps)) if steps is not None else max(cfg.epochs * per_epoch, cfg.min_steps)
        )
        round_steps = math.ceil(total / min(cfg.evaluations, total))
        floored = steps is None and cfg.min_steps > cfg.epochs * per_epoch
        return cls(
            total,
            round_steps,
            int(round(cfg.warmup_fraction * total)),
            per_epoch,
            global_batch,
            floored,
        )

    @property
    def rounds(self) -> int:
        return math.ceil(self.total_steps / self.round_steps)


def learning_rate(cfg: TrainConfig, plan: Schedule, step: int) -> float:
    """Rate at ``step``: scaled to the global batch of the plan, warm-up, cosine."""
    peak = scaled_lr(cfg.learning_rate, plan.global_batch, cfg.lr_reference_batch)
    return peak * lr_factor(step, plan.total_steps, plan.warmup_steps, WARMUP_START)


def refit_steps(history: list[dict], n_selected: int, n_all: int) -> tuple[int, int]:
    """Steps of a refit on ``n_all`` samples, and the selection run's best round: as many passes over
    them as that run, on ``n_selected`` samples, made up to its best round (that round's steps scaled by
    n_all / n_selected)."""
    if not history:
        raise LcflowError("a refit needs the selection run's history: it trained no round")
    best_round = int(history[-1].get("best_round") or 0)
    step = next(
        (int(r["step"]) for r in history if r["round"] == best_round), int(history[-1]["step"])
    )
    return max(1, int(round(step * n_all / n_selected))), best_round
