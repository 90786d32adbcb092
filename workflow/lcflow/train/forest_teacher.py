"""A Random Forest as a deep model's teacher (``distill``): the network learns from the forest's
out-of-fold class probabilities as well as from the labels.

On a few hundred training rows a forest is the stronger model and a network overfits its labels (and
their noise). Knowledge distillation (Hinton et al. 2015) trains the network towards a blend of each
row's label and a teacher's probabilities for it, which carry what the teacher learnt about classes that
look alike. The teacher must not have seen the row, or its probability is the label again: each row's
probabilities come from forests trained on the other spatial blocks only (out-of-fold, as label cleaning
judges samples), so neighbours cannot vouch for it either.
"""

import logging

import numpy as np

from lcflow.labels.cleaning import out_of_fold_proba

log = logging.getLogger("lcflow.train")

#: folds and trees of the teacher's forests
TEACHER_FOLDS, TEACHER_TREES = 5, 200


def teacher_targets(x: np.ndarray, y: np.ndarray, groups: np.ndarray | None, n_classes: int, share: float,
                    seed: int, n_jobs: int = -1) -> np.ndarray:
    """Training targets (samples, n_classes): ``1 - share`` of each row's one-hot label plus ``share`` of
    the out-of-fold forests' probabilities for it. x: the model's input (samples, ...) without NaN;
    y: class indices 0..n_classes-1; ``groups``: each row's spatial block (None: rows are their own)."""
    n = len(y)
    flat = x.reshape(n, -1)
    if groups is None:  # no positions: folds of rows, in a seeded order
        groups = np.random.default_rng(seed).permutation(n)
    folds = min(TEACHER_FOLDS, np.unique(groups).size)
    onehot = np.eye(n_classes)[y]
    if folds < 2:
        log.warning("distill: the training rows lie in one spatial block: no forest can judge them unseen; "
                    "training on the labels alone")
        return onehot.astype(np.float32)
    proba, classes = out_of_fold_proba(flat, y, groups, folds, TEACHER_TREES, seed, n_jobs)
    teacher = np.zeros((n, n_classes))
    teacher[:, classes] = proba
    agree = float((teacher.argmax(1) == y).mean())
    log.info("distill: a forest's out-of-fold probabilities (%d folds by spatial block, %d trees) take %.2f of "
             "the targets; they agree with %.3f of the %d training labels", folds, TEACHER_TREES, share, agree, n)
    return ((1 - share) * onehot + share * teacher).astype(np.float32)
