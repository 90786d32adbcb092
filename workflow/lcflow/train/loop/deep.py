"""Data-parallel training of a PyTorch classifier: one process or many, same code, same result.

The run follows the recipe (:mod:`lcflow.train.loop.recipe`), in optimizer steps:
- the samples form one stream, epoch after epoch, each a seeded permutation; every step takes the next
  global batch (``batch_size`` x workers) from it and each rank its own slice, so the number of workers
  changes how a global batch is shared, never which samples it holds;
- after each of its rounds the validation accuracy (summed over ranks) keeps the best weights, rank 0
  writes a checkpoint (temporary file, then rename) that a restarted job resumes from, and ``patience``
  rounds without a better one stop the run. A run that ended (its last round, or an early stop) marks its
  checkpoint finished: the same run started from it trains nothing and ends with its weights (a study's
  best trial becomes the final model so);
- with ``weight_ema`` > 0 an exponential moving average of the weights follows every step
  (``torch.optim.swa_utils.AveragedModel``); it is what each round validates, what the best round keeps
  and what a run without validation rows ends with, and the checkpoint holds it.
Every random draw is seeded from (seed, round, rank), so a resumed run repeats an uninterrupted one.
"""

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel

from lcflow.common.progress import training_round
from lcflow.errors import LcflowError
from lcflow.train.data.balance import class_weights
from lcflow.train.loop import run_checkpoint
from lcflow.train.loop.amp import bfloat16_runs
from lcflow.train.loop.batch_augmentation import augment
from lcflow.train.loop.elastic import elastic_rounds
from lcflow.train.loop.optim import make_optimizer
from lcflow.train.loop.recipe import Schedule, TrainConfig, learning_rate
from lcflow.train.loop.samples import Samples, SampleStream, seeded
from lcflow.train.loop.selection import better, selectable
from lcflow.train.loop.weight_average import weight_average
from lcflow.train.models.batch_inference import predict_proba
from lcflow.train.parallel.distributed import Single, network_settings, node_name

log = logging.getLogger("lcflow.train")


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


def _log_rank(comm, device: torch.device) -> None:
    """Where this rank runs and, in a job of several, the network variables it runs with (what a site's
    per-job set-up gave it)."""
    log.info(
        "rank=%d size=%d local_rank=%d node=%s device=%s",
        comm.rank,
        comm.size,
        comm.local_rank,
        node_name(),
        device,
    )
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


def fit(
    net: nn.Module,
    samples: Samples,
    cfg: TrainConfig,
    comm=None,
    *,
    checkpoint: run_checkpoint.Checkpoint | None = None,
    on_round: Callable[[dict], bool] | None = None,
    status: dict | None = None,
    steps: int | None = None,
) -> list[dict[str, float]]:
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
    run, weights = _prepared(net, samples, cfg, comm, steps)
    path, fingerprint = (
        (None, "") if checkpoint is None else (checkpoint.path, checkpoint.fingerprint)
    )
    progress = _resumed(run, path, fingerprint)
    if status is not None:
        status.update(
            resumed_round=int(progress["round"]),
            finished_before=bool(progress.get("finished")),
            loss_weights=weights.tolist(),
        )
    plan, optimizer, averaged, data = run.plan, run.optimizer, run.averaged, run.data

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
            progress = elastic_rounds(net, optimizer, progress, one_round, plan, comm, averaged)
        else:
            for r in range(progress["round"] + 1, plan.rounds + 1):
                if not one_round(r):
                    break
        # ended by its last round or an early stop (a pruned trial's was cut short)
        if not progress.get("pruned"):
            progress["finished"] = True
            if comm.rank == 0 and path is not None:
                run_checkpoint.save(
                    path, net, optimizer, progress, fingerprint, comm.size, averaged
                )
    if status is not None:
        status["seconds"] = float(progress.get("seconds", 0.0))
    _keep_final_weights(net, progress, averaged)
    log.debug("rank=%d size=%d final weights sha256=%s", comm.rank, comm.size, state_checksum(net))
    return progress["history"]


def _prepared(
    net: nn.Module, samples: Samples, cfg: TrainConfig, comm, steps: int | None
) -> tuple[_Run, np.ndarray]:
    """The run's parts on this rank's device (its weights' average, where there is one, comes with the
    checkpoint: :func:`_resumed`), and the class weights of its loss."""
    device = device_for(comm.local_rank)
    _log_rank(comm, device)
    net.to(device)
    # wrap first, then touch the state: Horovod builds a new optimizer object around the groups
    optimizer = comm.distributed_optimizer(
        make_optimizer(
            cfg.optimizer, net.parameters(), cfg.learning_rate, cfg.weight_decay, cfg.momentum
        ),
        net,
        cfg.fp16_allreduce,
    )
    # recorded in status
    weights = class_weights(samples.y.astype(np.int64), samples.n_classes, cfg.class_weight)
    loss_fn = nn.CrossEntropyLoss(
        weight=torch.as_tensor(weights, dtype=torch.float32, device=device),
        label_smoothing=cfg.label_smoothing,
    )
    data = SampleStream(samples, cfg.seed, device)
    plan = Schedule.plan(cfg, len(samples.x), comm.size, steps)
    use_amp = cfg.amp and bfloat16_runs(net, data.x[:2], device)
    if cfg.amp and not use_amp:
        log.warning(
            "amp: this CPU cannot run the network in bfloat16 (torch reports CPU capability %s); training in "
            "float32",
            torch.backends.cpu.get_cpu_capability(),
        )
    return _Run(
        net, optimizer, loss_fn, data, cfg, plan, comm, device, use_amp, None, samples
    ), weights


def _resumed(run: _Run, path: Path | None, fingerprint: str) -> dict:
    """The run's progress: afresh, or from its checkpoint at ``path`` where that is this run's (every rank
    restores the same state the same way); the weights' average, where the recipe keeps one, with it."""
    net, comm, cfg = run.net, run.comm, run.cfg
    saved = comm.broadcast_object(
        run_checkpoint.read(path, fingerprint, comm.size, cfg.elastic) if comm.rank == 0 else None
    )
    progress, run.plan = _restored(net, run.optimizer, saved, run.plan, path)
    comm.broadcast_parameters(net)
    run.averaged = weight_average(net, cfg.weight_ema)
    if run.averaged is not None and saved is not None:
        run.averaged.load_state_dict(saved["averaged"])
    plan = run.plan
    log.info(
        "schedule: %d steps (%d a pass over %d samples, global batch %d) in %d rounds, warm-up %d steps",
        plan.total_steps,
        plan.steps_per_epoch,
        run.data.n,
        plan.global_batch,
        plan.rounds,
        plan.warmup_steps,
    )
    if plan.floored:
        log.info(
            "epochs %d would be %d steps; min_steps %d makes the run %d steps (%.1f passes over the samples): "
            "set model_params.<model>.min_steps lower (0: epochs alone) for fewer",
            cfg.epochs,
            cfg.epochs * plan.steps_per_epoch,
            cfg.min_steps,
            plan.total_steps,
            plan.total_steps / plan.steps_per_epoch,
        )
    return progress


def _record(row: dict, seconds: float, progress: dict, rounds: int, rank: int) -> None:
    """A round done: in the history, its time counted, its line in the log (rank 0; each rank's sums are at
    debug level, -v)."""
    progress["history"].append(row)
    progress["round"] = row["round"]
    progress["seconds"] = progress.get("seconds", 0.0) + seconds
    if rank == 0:
        log.info(training_round(row, rounds, progress["seconds"], len(progress["history"])))


def _stops(
    row: dict,
    progress: dict,
    rounds: int,
    on_round: Callable[[dict], bool] | None,
    data: SampleStream,
    patience: int,
) -> bool:
    """Whether the run stops after this round: pruned (``on_round``), or no better validation for ``patience``."""
    if on_round is not None and on_round(row):
        log.info(
            "stopped after round %d of %d (step %d): pruned", row["round"], rounds, progress["step"]
        )
        progress["pruned"] = True
        return True
    if data.x_val is not None and len(data.x_val) and progress["waited"] >= patience:
        log.info(
            "early stop after round %d of %d (step %d; best val accuracy %.4f, loss %.4f)",
            row["round"],
            rounds,
            progress["step"],
            *progress["best"],
        )
        return True
    return False


def _restored(
    net: nn.Module, optimizer, saved: dict | None, plan: "Schedule", checkpoint: Path | None
) -> tuple[dict, "Schedule"]:
    """The run's progress and schedule: afresh, or from its checkpoint (weights and optimizer restored)."""
    if saved is None:
        return {
            "round": 0,
            "step": 0,
            "position": 0,
            "history": [],
            "best": [-1.0, 0.0],
            "best_state": None,
            "best_round": 0,
            "waited": 0,
            "schedule": asdict(plan),
        }, plan
    net.load_state_dict(saved["net"])
    optimizer.load_state_dict(saved["optimizer"])
    progress = saved["progress"]
    if progress.get("finished"):
        log.info(
            "checkpoint %s holds this run ended after round %d: its best weights (round %d) are taken, "
            "nothing is trained",
            checkpoint,
            progress["round"],
            progress["best_round"],
        )
    else:
        log.info("resumed from checkpoint %s after round %d", checkpoint, progress["round"])
    return progress, Schedule(**progress["schedule"])


def _check_recipe(cfg: TrainConfig, comm, observed_flag: int | None) -> None:
    if cfg.drop_observations > 0 and observed_flag is None:
        raise LcflowError(
            "drop_observations hides observed steps of pixel series: this network's input has no "
            "observed flag (patches); set drop_observations=0"
        )
    if cfg.elastic and comm.name == "torch":
        raise LcflowError(
            "elastic training is Horovod's (hvd.elastic): set distributed.backend: horovod, or "
            "elastic=false"
        )


def _keep_final_weights(net: nn.Module, progress: dict, averaged: AveragedModel | None) -> None:
    """The run's model: its best validation round's weights, else (a refit, no validation rows) the average of
    its last steps where weights are averaged, else its last step's; on the CPU."""
    if progress["best_state"] is not None:
        net.load_state_dict(progress["best_state"])
    elif averaged is not None:
        net.load_state_dict(averaged.module.state_dict())
    net.to("cpu")


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
        batch_in = augment(
            data.x[bi],
            data.targets[bi],
            cfg.drop_observations,
            cfg.input_noise,
            cfg.mixup,
            run.samples.observed_flag,
        )
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=run.use_amp):
            logits = run.net(batch_in.x).float()
            loss = batch_in.loss(run.loss_fn, logits)
        run.optimizer.zero_grad()
        loss.backward()
        run.optimizer.step()
        if run.averaged is not None:
            run.averaged.update_parameters(run.net)
        totals += (
            loss.item() * len(batch),
            int((logits.argmax(1) == data.y[bi]).sum()),
            len(batch),
        )
    progress["step"] = last
    log.debug(
        "round=%d rank=%d size=%d steps=%d-%d loss_sum=%.6f correct=%d seen=%d",
        r,
        rank,
        size,
        first + 1,
        last,
        *totals,
    )
    loss_sum, correct, seen = run.comm.allreduce_sum(totals, name=f"lcflow.train.{r}")
    elapsed = (
        run.comm.allreduce_sum(np.array([time.perf_counter() - start]), name=f"lcflow.time.{r}")[0]
        / size
    )
    return {
        "round": r,
        "step": last,
        "epoch": float(progress["position"] / data.n),
        "loss": float(loss_sum / seen),
        "accuracy": float(correct / seen),
        "learning_rate": lr,
        "samples_per_s": float(seen / elapsed),
        "workers": size,
    }


def _validate(run: _Run, r: int, row: dict, progress: dict) -> None:
    """Validation accuracy, balanced accuracy and loss summed over ranks; keeps the best weights in
    ``progress`` by the recipe's ``select_by`` (:func:`lcflow.train.loop.selection.better`) once warm-up is over;
    patience counts from there."""
    data, n_classes = run.data, run.samples.n_classes
    x_val, y_val = data.x_val, data.y_val
    if x_val is None or y_val is None or not len(x_val):
        return
    net = run.validated
    shard = data.val_shard(run.comm.rank, run.comm.size)
    # correct, seen, negative log-likelihood; per class: correct, seen
    local = np.zeros(3 + 2 * n_classes)
    if len(shard):
        proba, yv = predict_proba(net, x_val[shard], run.device), y_val[shard]
        hit = proba.argmax(1) == yv
        local[:3] = (hit.sum(), len(yv), -np.log(proba[np.arange(len(yv)), yv] + 1e-9).sum())
        local[3 : 3 + n_classes] = np.bincount(yv[hit], minlength=n_classes)
        local[3 + n_classes :] = np.bincount(yv, minlength=n_classes)
    total = run.comm.allreduce_sum(local, name=f"lcflow.val.{r}")
    v_correct, v_seen, v_nll = total[:3]
    per_class_correct, per_class_seen = total[3 : 3 + n_classes], total[3 + n_classes :]
    present = per_class_seen > 0
    row.update(
        val_accuracy=float(v_correct / v_seen),
        val_loss=float(v_nll / v_seen),
        val_balanced_accuracy=float(np.mean(per_class_correct[present] / per_class_seen[present])),
    )
    # a model still warming up is no candidate, however lucky on a small val set
    if selectable(row["step"], run.plan.warmup_steps, run.plan.total_steps):
        if better(row, progress["best"], run.cfg.select_by, progress["best_round"] > 0):
            progress.update(
                best=[row["val_accuracy"], row["val_loss"]],
                waited=0,
                best_round=r,
                best_state={k: v.detach().cpu().clone() for k, v in net.state_dict().items()},
            )
        else:
            progress["waited"] += 1
    # the round whose weights the run ends with, so far
    row["best_round"] = progress.get("best_round", 0)
