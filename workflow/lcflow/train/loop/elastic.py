"""Training rounds under Horovod's elastic mode (``hvd.elastic``): a run that survives workers leaving and
joining (started with ``horovodrun --min-np/--max-np``)."""

import copy
import logging

from torch.optim.swa_utils import AveragedModel

from lcflow.train.loop.recipe import Schedule

log = logging.getLogger("lcflow.train")


def elastic_rounds(
    net,
    optimizer,
    progress: dict,
    one_round,
    plan: Schedule,
    comm,
    averaged: AveragedModel | None = None,
) -> dict:
    """Rounds under ``hvd.elastic``: a worker that dies rolls the others back to the last committed
    round, the world shrinks (or grows), each global batch is shared by the workers of the moment
    (the weights' average, where there is one, is rolled back with the weights). Returns the progress of
    the last committed round.

    Args:
        net: the network, its weights committed with each round.
        optimizer: its optimiser, committed with it.
        progress: the run's progress so far (:mod:`lcflow.train.loop.deep`); updated in place each round.
        one_round: trains and validates round ``r`` on the workers of the moment; False stops the run.
        plan: the run's schedule, kept as workers come and go.
        comm: Horovod's group (``comm.hvd``).
        averaged: the weights' moving average, where the recipe keeps one.
    """
    hvd = comm.hvd
    extra = {} if averaged is None else {"averaged": averaged}
    state = hvd.elastic.TorchState(
        model=net, optimizer=optimizer, progress=copy.deepcopy(progress), **extra
    )
    state.register_reset_callbacks([lambda: log.info("elastic reset: now %d workers", hvd.size())])

    @hvd.elastic.run
    def loop(state):
        while state.progress["round"] < plan.rounds:
            # after a reset: the last commit; never share its lists
            committed = copy.deepcopy(state.progress)
            progress.clear()
            progress.update(committed)
            go_on = one_round(progress["round"] + 1)
            state.progress = dict(progress)
            state.commit()
            if not go_on:
                break

    loop(state)
    return state.progress
