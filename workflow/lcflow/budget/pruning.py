"""The share of a study's training rounds that its pruner lets run: the study's own pruner (Optuna's, as
``lcflow.tune`` builds it) replayed on simulated trials whose validation curves rise and never cross, a
trial's quality drawn at random. Early trials have no peers to lose to and run whole, so a small study
prunes less than successive halving's asymptote."""

from __future__ import annotations

import logging


def share_run(
    pruner: str, min_rounds: int, rounds: int, reduction_factor: int, trials: int, studies: int = 8
) -> float:
    """Mean share of ``trials`` x ``rounds`` validation rounds run, over ``studies`` replays (seeded).

    Args:
        pruner: the study's pruner (``hpo.pruner``).
        min_rounds: rounds a trial runs before it may be pruned (``hpo.min_rounds``).
        rounds: validation rounds of a whole trial (its epochs).
        reduction_factor: successive halving's reduction factor (``hpo.reduction_factor``).
        trials: trials of a study.
        studies: replays averaged.
    """
    if pruner == "none" or rounds <= min_rounds or trials <= 1:
        return 1.0
    import numpy as np
    import optuna

    from lcflow.tune.study import make_pruner

    optuna.logging.set_verbosity(logging.WARNING)
    run = 0
    for seed in range(studies):
        qualities = np.random.default_rng(seed).random(trials)
        study = optuna.create_study(
            direction="maximize",
            sampler=optuna.samplers.RandomSampler(seed=seed),
            pruner=make_pruner(pruner, min_rounds, rounds, reduction_factor),
        )
        for quality in qualities:
            trial = study.ask()
            for k in range(1, rounds + 1):
                run += 1
                trial.report(float(quality) * k / (k + 1), k)
                if trial.should_prune():
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    break
            else:
                study.tell(trial, float(quality) * rounds / (rounds + 1))
    return run / (studies * trials * rounds)
