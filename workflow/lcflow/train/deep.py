"""Data-parallel training of a PyTorch classifier: one process or many, same code, same result.

The recipe is counted in optimizer steps, so it holds from a few hundred samples to millions:
- the run takes ``epochs`` passes over the training samples, but at least ``min_steps`` steps: a small
  table trains to convergence, a large one is not slowed down;
- the samples form one stream, epoch after epoch, each a seeded permutation; every step takes the next
  global batch (``batch_size`` x workers) from it and each rank its own slice, so the number of workers
  changes how a global batch is shared, never which samples it holds;
- the learning rate scales with the global batch, warms up linearly over ``warmup_fraction`` of the
  steps from a tenth of its peak, then decays along a cosine to zero;
- the run is cut into ``evaluations`` rounds; after each, the validation accuracy (summed over ranks)
  keeps the best weights, rank 0 writes a checkpoint (temporary file, then rename) that a restarted
  job resumes from, and ``patience`` rounds without a better one stop the run. A run that ended (its
  last round, or an early stop) marks its checkpoint finished: the same run started from it trains
  nothing and ends with its weights (a study's best trial becomes the final model so);
- with ``weight_ema`` > 0 an exponential moving average of the weights follows every step
  (``torch.optim.swa_utils.AveragedModel``); it is what each round validates, what the best round keeps
  and what a run without validation rows ends with, and the checkpoint holds it.
Every random draw is seeded from (seed, round, rank), so a resumed run repeats an uninterrupted one.
"""

import copy
import hashlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel

from lcflow.common.progress import training_round
from lcflow.errors import LcflowError
from lcflow.train import run_checkpoint
from lcflow.train.balance import class_weights
from lcflow.train.batch_augmentation import augment
from lcflow.train.batch_inference import predict_proba
from lcflow.train.distributed import Single, network_settings, node_name
from lcflow.train.hyperparameters import CheckedParams
from lcflow.train.optim import lr_factor, make_optimizer, scaled_lr
from lcflow.train.samples import Samples, SampleStream, seeded
from lcflow.train.selection import better, selectable
from lcflow.train.weight_average import weight_average

log = logging.getLogger("lcflow.train")

#: the learning rate's warm-up starts at this share of its peak
WARMUP_START = 0.1


@dataclass
class TrainConfig:
    """How a deep model is trained; names, defaults and ranges in :data:`lcflow.train.hyperparameters.TRAINING`."""

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
    input_noise: float  # standard deviation of Gaussian noise on training inputs (standardised units)
    mixup: float  # alpha of mixup's Beta(alpha, alpha); 0: off
    drop_observations: float  # share of observed steps hidden from each training series; 0: off
    weight_ema: float  # decay a step of the weights' moving average; 0: off
    select_by: str  # what picks the best round: val accuracy (ties: lower loss) or val loss
    distill: float  # share of the targets taken from a forest teacher's probabilities (lcflow.train.forest_teacher)
    val_fraction: float
    seed: int
    threads: int
    fp16_allreduce: bool
    amp: bool  # bfloat16 autocast of the training steps, on GPU or CPU
    elastic: bool  # hvd.elastic: survive workers leaving (launch with horovodrun --min-np/--max-np)

    @classmethod
    def from_params(cls, given: CheckedParams) -> "TrainConfig":
        """From a model's parameters, as :func:`lcflow.train.hyperparameters.check` returns them (every one
        given, checked, defaults filled in)."""
        return cls(**{f.name: given[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class Schedule:
    """The run in steps, fixed when it starts (an elastic run keeps it when workers come and go)."""

    total_steps: int
    round_steps: int
    warmup_steps: int
    steps_per_epoch: int
    global_batch: int

    @classmethod
    def plan(cls, cfg: TrainConfig, n_train: int, size: int, steps: int | None = None) -> "Schedule":
        """The schedule of ``cfg`` on ``n_train`` samples and ``size`` workers; ``steps``, when given, is
        the run's length instead of epochs and min_steps (a refit's)."""
        global_batch = cfg.batch_size * size
        per_epoch = max(1, math.ceil(n_train / global_batch))
        total = max(1, int(steps)) if steps is not None else max(cfg.epochs * per_epoch, cfg.min_steps)
        round_steps = math.ceil(total / min(cfg.evaluations, total))
        return cls(total, round_steps, int(round(cfg.warmup_fraction * total)), per_epoch, global_batch)

    @property
    def rounds(self) -> int:
        return math.ceil(self.total_steps / self.round_steps)


def device_for(local_rank: int) -> torch.device:
    """One GPU per local rank when there are GPUs, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def state_checksum(net: nn.Module) -> str:
    """SHA-256 of all weights, to show that ranks (or runs) hold identical models."""
    h = hashlib.sha256()
    for name, tensor in sorted(net.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def learning_rate(cfg: TrainConfig, plan: Schedule, step: int) -> float:
    """Rate at ``step``: scaled to the global batch of the plan, warm-up, cosine."""
    peak = scaled_lr(cfg.learning_rate, plan.global_batch, cfg.lr_reference_batch)
    return peak * lr_factor(step, plan.total_steps, plan.warmup_steps, WARMUP_START)


def _log_rank(comm, device: torch.device) -> None:
    """Where this rank runs and, in a job of several, the network variables it runs with (what a site's
    per-job set-up gave it)."""
    log.info("rank=%d size=%d local_rank=%d node=%s device=%s", comm.rank, comm.size, comm.local_rank,
             node_name(), device)
    if comm.size > 1:
        log.info("rank=%d network: %s", comm.rank, network_settings())


@dataclass
class _Run:
    """A run's parts, as every round uses them."""

    net: nn.Module
    optimizer: Any
    loss_fn: nn.Module
    data: SampleStream
    cfg: TrainConfig
    plan: Schedule
    comm: Any
    device: torch.device
    use_amp: bool
    averaged: AveragedModel | None
    samples: Samples

    @property
    def validated(self) -> nn.Module:
        """The network each round validates: the weights' average where there is one."""
        return self.net if self.averaged is None else self.averaged.module


def fit(net: nn.Module, samples: Samples, cfg: TrainConfig, comm=None, *,
        checkpoint: run_checkpoint.Checkpoint | None = None, on_round: Callable[[dict], bool] | None = None,
        status: dict | None = None, steps: int | None = None) -> list[dict[str, float]]:
    """Train ``net`` in place (ending with the best validation round); return the history of rank 0.

    Args:
        net: the network, its initial weights the same on every rank.
        samples: the rows it learns from and is validated on.
        cfg: the recipe.
        comm: the data-parallel group (None: one process).
        checkpoint: where rank 0 writes the run's checkpoint after every round, and what run it is; a
            checkpoint of this run is resumed from (None: none is kept).
        on_round: called on every rank with each round's history row; True stops the run there (a pruned
            trial of a study). It must return the same on every rank.
        status: when given, filled with where the run started, ``resumed_round`` (0: afresh) and
            ``finished_before`` (the checkpoint held an ended run, so nothing was trained), ``loss_weights``
            (the class weights of the loss), and ``seconds``: the run's rounds, over every job that trained
            them.
        steps: the run's length instead of ``cfg``'s epochs and min_steps (a refit, which has no validation
            rows: it trains every step and ends with its last weights).
    """
    comm = comm or Single()
    _check_recipe(cfg, comm, samples.observed_flag)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    device = device_for(comm.local_rank)
    _log_rank(comm, device)
    net.to(device)
    # wrap first, then touch the state: Horovod builds a new optimizer object around the groups
    optimizer = comm.distributed_optimizer(make_optimizer(cfg.optimizer, net.parameters(), cfg.learning_rate,
                                                          cfg.weight_decay, cfg.momentum), net, cfg.fp16_allreduce)
    weights = class_weights(samples.y.astype(np.int64), samples.n_classes, cfg.class_weight)  # recorded in status
    loss_fn = nn.CrossEntropyLoss(weight=torch.as_tensor(weights, dtype=torch.float32, device=device),
                                  label_smoothing=cfg.label_smoothing)
    data = SampleStream(samples, cfg.seed, device)
    plan = Schedule.plan(cfg, len(samples.x), comm.size, steps)
    use_amp = cfg.amp and bfloat16_runs(net, data.x[:2], device)
    if cfg.amp and not use_amp:
        log.warning("amp: this CPU cannot run the network in bfloat16 (torch reports CPU capability %s); training in "
                    "float32", torch.backends.cpu.get_cpu_capability())

    # every rank restores the same state the same way
    path, fingerprint = (None, "") if checkpoint is None else (checkpoint.path, checkpoint.fingerprint)
    saved = comm.broadcast_object(run_checkpoint.read(path, fingerprint, comm.size, cfg.elastic) if comm.rank == 0
                                  else None)
    progress, plan = _restored(net, optimizer, saved, plan, path)
    if status is not None:
        status.update(resumed_round=int(progress["round"]), finished_before=bool(progress.get("finished")), loss_weights=weights.tolist())
    comm.broadcast_parameters(net)
    averaged = weight_average(net, cfg.weight_ema)
    if averaged is not None and saved is not None:
        averaged.load_state_dict(saved["averaged"])
    log.info("schedule: %d steps (%d a pass over %d samples, global batch %d) in %d rounds, warm-up %d steps",
             plan.total_steps, plan.steps_per_epoch, len(samples.x), plan.global_batch, plan.rounds, plan.warmup_steps)
    run = _Run(net, optimizer, loss_fn, data, cfg, plan, comm, device, use_amp, averaged, samples)

    def one_round(r: int) -> bool:
        """Train and validate one round on the current world; False once training should stop."""
        started = time.perf_counter()
        row = _train_round(run, r, progress)
        _validate(run, r, row, progress)
        _record(row, time.perf_counter() - started, progress, plan.rounds, comm.rank)
        if comm.rank == 0 and path is not None:
            run_checkpoint.save(path, net, optimizer, progress, fingerprint, comm.size, averaged)
        return not _stops(row, progress, plan.rounds, on_round, data, cfg.patience)

    if not progress.get("finished"):  # an ended run taken from its checkpoint trains nothing
        if cfg.elastic and comm.name == "horovod":
            progress = _fit_elastic(net, optimizer, progress, one_round, plan, comm, averaged)
        else:
            for r in range(progress["round"] + 1, plan.rounds + 1):
                if not one_round(r):
                    break
        if not progress.get("pruned"):  # ended by its last round or an early stop (a pruned trial's was cut short)
            progress["finished"] = True
            if comm.rank == 0 and path is not None:
                run_checkpoint.save(path, net, optimizer, progress, fingerprint, comm.size, averaged)
    if status is not None:
        status["seconds"] = float(progress.get("seconds", 0.0))
    _keep_final_weights(net, progress, averaged)
    log.debug("rank=%d size=%d final weights sha256=%s", comm.rank, comm.size, state_checksum(net))
    return progress["history"]


def _record(row: dict, seconds: float, progress: dict, rounds: int, rank: int) -> None:
    """A round done: in the history, its time counted, its line in the log (rank 0; each rank's sums are at
    debug level, -v)."""
    progress["history"].append(row)
    progress["round"] = row["round"]
    progress["seconds"] = progress.get("seconds", 0.0) + seconds
    if rank == 0:
        log.info(training_round(row, rounds, progress["seconds"], len(progress["history"])))


def _stops(row: dict, progress: dict, rounds: int, on_round: Callable[[dict], bool] | None, data: SampleStream,
           patience: int) -> bool:
    """Whether the run stops after this round: pruned (``on_round``), or no better validation for ``patience``."""
    if on_round is not None and on_round(row):
        log.info("stopped after round %d of %d (step %d): pruned", row["round"], rounds, progress["step"])
        progress["pruned"] = True
        return True
    if data.x_val is not None and len(data.x_val) and progress["waited"] >= patience:
        log.info("early stop after round %d of %d (step %d; best val accuracy %.4f, loss %.4f)", row["round"], rounds,
                 progress["step"], *progress["best"])
        return True
    return False


def _restored(net: nn.Module, optimizer, saved: dict | None, plan: "Schedule",
              checkpoint: Path | None) -> tuple[dict, "Schedule"]:
    """The run's progress and schedule: afresh, or from its checkpoint (weights and optimizer restored)."""
    if saved is None:
        return {"round": 0, "step": 0, "position": 0, "history": [], "best": [-1.0, 0.0], "best_state": None,
                "best_round": 0, "waited": 0, "schedule": asdict(plan)}, plan
    net.load_state_dict(saved["net"])
    optimizer.load_state_dict(saved["optimizer"])
    progress = saved["progress"]
    if progress.get("finished"):
        log.info("checkpoint %s holds this run ended after round %d: its best weights (round %d) are taken, "
                 "nothing is trained", checkpoint, progress["round"], progress["best_round"])
    else:
        log.info("resumed from checkpoint %s after round %d", checkpoint, progress["round"])
    return progress, Schedule(**progress["schedule"])


def _check_recipe(cfg: TrainConfig, comm, observed_flag: int | None) -> None:
    if cfg.drop_observations > 0 and observed_flag is None:
        raise LcflowError("drop_observations hides observed steps of pixel series: this network's input has no "
                          "observed flag (patches); set drop_observations=0")
    if cfg.elastic and comm.name == "torch":
        raise LcflowError("elastic training is Horovod's (hvd.elastic): set distributed.backend: horovod, or "
                          "elastic=false")


def _keep_final_weights(net: nn.Module, progress: dict, averaged: AveragedModel | None) -> None:
    """The run's model: its best validation round's weights, else (a refit, no validation rows) the average of
    its last steps where weights are averaged, else its last step's; on the CPU."""
    if progress["best_state"] is not None:
        net.load_state_dict(progress["best_state"])
    elif averaged is not None:
        net.load_state_dict(averaged.module.state_dict())
    net.to("cpu")


def refit_steps(history: list[dict], n_selected: int, n_all: int) -> tuple[int, int]:
    """Steps of a refit on ``n_all`` samples, and the selection run's best round: as many passes over
    them as that run, on ``n_selected`` samples, made up to its best round (that round's steps scaled by
    n_all / n_selected)."""
    if not history:
        raise LcflowError("a refit needs the selection run's history: it trained no round")
    best_round = int(history[-1].get("best_round") or 0)
    step = next((int(r["step"]) for r in history if r["round"] == best_round), int(history[-1]["step"]))
    return max(1, int(round(step * n_all / n_selected))), best_round


def _fit_elastic(net, optimizer, progress: dict, one_round, plan: Schedule, comm,
                 averaged: AveragedModel | None = None) -> dict:
    """Rounds under ``hvd.elastic``: a worker that dies rolls the others back to the last committed
    round, the world shrinks (or grows), each global batch is shared by the workers of the moment
    (the weights' average, where there is one, is rolled back with the weights)."""
    hvd = comm.hvd
    extra = {} if averaged is None else {"averaged": averaged}
    state = hvd.elastic.TorchState(model=net, optimizer=optimizer, progress=copy.deepcopy(progress), **extra)
    state.register_reset_callbacks([lambda: log.info("elastic reset: now %d workers", hvd.size())])

    @hvd.elastic.run
    def loop(state):
        while state.progress["round"] < plan.rounds:
            committed = copy.deepcopy(state.progress)  # after a reset: the last commit; never share its lists
            progress.clear()
            progress.update(committed)
            go_on = one_round(progress["round"] + 1)
            state.progress = dict(progress)
            state.commit()
            if not go_on:
                break

    loop(state)
    return state.progress


def bfloat16_runs(net: nn.Module, xb: torch.Tensor, device: torch.device) -> bool:
    """Whether a forward and backward pass of (a copy of) ``net`` run under bfloat16 autocast on ``device``.

    GPUs that train here do; a CPU may not: on one without native bfloat16 (AVX2 only) oneDNN has no
    bfloat16 LSTM and the forward pass fails, while convolutions and attention fall back and run. So the
    network itself is tried, on a copy in eval mode, which draws no random number and leaves no trace.
    """
    if device.type != "cpu":
        return True
    probe = copy.deepcopy(net).eval()
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = probe(xb)
        out.float().sum().backward()
    except RuntimeError as exc:
        log.debug("bfloat16 autocast fails on this CPU: %s", str(exc).strip().splitlines()[0][:200])
        return False
    return True


def _train_round(run: _Run, r: int, progress: dict) -> dict:
    """The steps of round ``r``: each takes the next global batch of the stream, this rank its slice;
    under bfloat16 autocast where the run uses it; the weights' average, where there is one, follows each step."""
    cfg, plan, data, device = run.cfg, run.plan, run.data, run.device
    rank, size = run.comm.rank, run.comm.size
    run.net.train()
    torch.manual_seed(seeded(cfg.seed, r, rank))
    start = time.perf_counter()
    totals = np.zeros(3)  # loss sum, correct, seen
    first, last = (r - 1) * plan.round_steps, min(r * plan.round_steps, plan.total_steps)
    lr = learning_rate(cfg, plan, first)
    for step in range(first, last):
        lr = learning_rate(cfg, plan, step)
        for group in run.optimizer.param_groups:
            group["lr"] = lr
        batch = data.take(progress["position"] + rank * cfg.batch_size, cfg.batch_size)
        progress["position"] += cfg.batch_size * size
        bi = torch.from_numpy(batch).to(device)
        batch_in = augment(data.x[bi], data.targets[bi], cfg.drop_observations, cfg.input_noise, cfg.mixup,
                           run.samples.observed_flag)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=run.use_amp):
            logits = run.net(batch_in.x).float()
            loss = batch_in.loss(run.loss_fn, logits)
        run.optimizer.zero_grad()
        loss.backward()
        run.optimizer.step()
        if run.averaged is not None:
            run.averaged.update_parameters(run.net)
        totals += (loss.item() * len(batch), int((logits.argmax(1) == data.y[bi]).sum()), len(batch))
    progress["step"] = last
    log.debug("round=%d rank=%d size=%d steps=%d-%d loss_sum=%.6f correct=%d seen=%d", r, rank, size, first + 1, last,
              *totals)
    loss_sum, correct, seen = run.comm.allreduce_sum(totals, name=f"lcflow.train.{r}")
    elapsed = run.comm.allreduce_sum(np.array([time.perf_counter() - start]), name=f"lcflow.time.{r}")[0] / size
    return {"round": r, "step": last, "epoch": float(progress["position"] / data.n), "loss": float(loss_sum / seen),
            "accuracy": float(correct / seen), "learning_rate": lr, "samples_per_s": float(seen / elapsed),
            "workers": size}


def _validate(run: _Run, r: int, row: dict, progress: dict) -> None:
    """Validation accuracy, balanced accuracy and loss summed over ranks; keeps the best weights in
    ``progress`` by the recipe's ``select_by`` (:func:`lcflow.train.selection.better`) once warm-up is over;
    patience counts from there."""
    data, n_classes = run.data, run.samples.n_classes
    x_val, y_val = data.x_val, data.y_val
    if x_val is None or y_val is None or not len(x_val):
        return
    net = run.validated
    shard = data.val_shard(run.comm.rank, run.comm.size)
    local = np.zeros(3 + 2 * n_classes)  # correct, seen, negative log-likelihood; per class: correct, seen
    if len(shard):
        proba, yv = predict_proba(net, x_val[shard], run.device), y_val[shard]
        hit = proba.argmax(1) == yv
        local[:3] = (hit.sum(), len(yv), -np.log(proba[np.arange(len(yv)), yv] + 1e-9).sum())
        local[3:3 + n_classes] = np.bincount(yv[hit], minlength=n_classes)
        local[3 + n_classes:] = np.bincount(yv, minlength=n_classes)
    total = run.comm.allreduce_sum(local, name=f"lcflow.val.{r}")
    v_correct, v_seen, v_nll = total[:3]
    per_class_correct, per_class_seen = total[3:3 + n_classes], total[3 + n_classes:]
    present = per_class_seen > 0
    row.update(val_accuracy=float(v_correct / v_seen), val_loss=float(v_nll / v_seen),
               val_balanced_accuracy=float(np.mean(per_class_correct[present] / per_class_seen[present])))
    # a model still warming up is no candidate, however lucky on a small val set
    if selectable(row["step"], run.plan.warmup_steps, run.plan.total_steps):
        if better(row, progress["best"], run.cfg.select_by, progress["best_round"] > 0):
            progress.update(best=[row["val_accuracy"], row["val_loss"]], waited=0, best_round=r,
                            best_state={k: v.detach().cpu().clone() for k, v in net.state_dict().items()})
        else:
            progress["waited"] += 1
    row["best_round"] = progress.get("best_round", 0)  # the round whose weights the run ends with, so far
