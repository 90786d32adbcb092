"""A Random Forest as a deep model's teacher (``distill``): the network learns from the forest's
out-of-fold class probabilities as well as from the labels.

On a few hundred training rows a forest is the stronger model and a network overfits its labels (and
their noise). Knowledge distillation (Hinton et al. 2015) trains the network towards a blend of each
row's label and a teacher's probabilities for it, which carry what the teacher learnt about classes that
look alike. The teacher must not have seen the row, or its probability is the label again: each row's
probabilities come from forests trained on the other spatial blocks only (out-of-fold, as label cleaning
judges samples), so neighbours cannot vouch for it either. Under several ranks the folds' forests are
shared out among them and their probabilities summed (each row is held out by one fold): every rank ends
with the targets one process finds, having fitted its share of the forests (at two ranks, three and two)
one at a time.
"""

import logging
from typing import Any

import numpy as np

from lcflow.labels.cleaning import JudgingForests, out_of_fold_proba
from lcflow.train.parallel.distributed import Single

log = logging.getLogger("lcflow.train")

#: folds and trees of the teacher's forests
TEACHER_FOLDS, TEACHER_TREES = 5, 200
#: the most rows a teacher's tree grows on (drawn with replacement from its fold's): fully grown on all of
#: a million-row table's, a tree's nodes grow with its rows and the teacher costs hours and gigabytes a
#: fold; at 25,000 its probabilities were as good as at 50,000 or uncapped (benchmarks/teacher_at_scale.py)
TEACHER_TREE_ROWS = 25_000


class ForestTeacher:
    """The teacher of one set of training rows: its out-of-fold probabilities are computed once per seed
    and blended with the labels at any share, so the trials of a study that train on the same rows (at
    the same or other shares) fit its forests once. x: the model's input (samples, ...) without NaN;
    y: class indices 0..n_classes-1; ``groups``: each row's spatial block (None: rows are their own)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, groups: np.ndarray | None, n_classes: int):
        self.x, self.y, self.groups, self.n_classes = x, y, groups, n_classes
        self._proba: dict[int, tuple[np.ndarray, int] | None] = {}

    def probabilities(
        self, seed: int, n_jobs: int = -1, comm: Any = None
    ) -> tuple[np.ndarray, int] | None:
        """The out-of-fold class probabilities (samples, n_classes) and the number of folds; None where
        the rows lie in one block (no forest can judge them unseen). ``comm``
        (:mod:`lcflow.train.parallel.distributed`; None: one process): the ranks that share the folds out, each
        of which must hold the same rows and call this at the same point."""
        if seed not in self._proba:
            self._proba[seed] = self._fit(seed, n_jobs, comm)
        return self._proba[seed]

    def _fit(self, seed: int, n_jobs: int, comm: Any) -> tuple[np.ndarray, int] | None:
        n = len(self.y)
        groups = self.groups
        if groups is None:  # no positions: folds of rows, in a seeded order
            groups = np.random.default_rng(seed).permutation(n)
        folds = min(TEACHER_FOLDS, np.unique(groups).size)
        if folds < 2:
            return None
        comm = comm or Single()
        mine = range(comm.rank, folds, comm.size)
        if comm.size > 1:
            log.info(
                "distill: rank %d of %d fits the teacher's folds %s of %d",
                comm.rank,
                comm.size,
                list(mine),
                folds,
            )
        forests = JudgingForests(folds, TEACHER_TREES, seed, TEACHER_TREE_ROWS)
        proba, classes = out_of_fold_proba(
            self.x.reshape(n, -1),
            self.y,
            groups,
            forests,
            n_jobs,
            only=mine,
            what="distill: the teacher",
        )
        teacher = np.zeros((n, self.n_classes))
        teacher[:, classes] = proba
        # each row is held out by one fold, so the sum over ranks is every fold's answer
        return comm.allreduce_sum(teacher, name=f"lcflow.teacher.{seed}.{n}"), folds

    def targets(self, share: float, seed: int, n_jobs: int = -1, comm: Any = None) -> np.ndarray:
        """Training targets (samples, n_classes): ``1 - share`` of each row's one-hot label plus ``share``
        of the out-of-fold forests' probabilities for it (``comm``: see :meth:`probabilities`)."""
        onehot = np.eye(self.n_classes)[self.y]
        fitted = self.probabilities(seed, n_jobs, comm)
        if fitted is None:
            log.warning(
                "distill: the training rows lie in one spatial block: no forest can judge them unseen; "
                "training on the labels alone"
            )
            return onehot.astype(np.float32)
        teacher, folds = fitted
        agree = float((teacher.argmax(1) == self.y).mean())
        log.info(
            "distill: a forest's out-of-fold probabilities (%d folds by spatial block, %d trees) take %.2f of "
            "the targets; they agree with %.3f of the %d training labels",
            folds,
            TEACHER_TREES,
            share,
            agree,
            len(self.y),
        )
        return ((1 - share) * onehot + share * teacher).astype(np.float32)
