"""Label-noise cleaning: drop training samples whose time series contradicts their CORINE label.

CORINE is a 25 ha map generalised from photo-interpretation: a pixel sampled inside a polygon often
belongs to another class (a pond in arable land, a hedge in pasture). Following consensus filtering
(Brodley & Friedl 1999) as used for land-cover time series (Pelletier et al. 2017; Paris et al. 2019),
each sample is judged by a Random Forest that never saw it nor its spatial block (out-of-fold, folds
by block so a mislabelled polygon cannot vouch for itself): a sample whose own label gets a low
out-of-fold probability while another class is more likely is dropped. A cap per class keeps rare
classes, which a forest predicts with less confidence, from being emptied. Each judging tree grows on
at most ``tree_rows`` of its fold's rows, so a tile-year of a country-wide study (per_class 5000: some
80,000 judged rows) is judged in bounded time and memory (benchmarks/cleaning_at_scale.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass, field, replace

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import GroupKFold
from sklearn.tree._tree import NODE_DTYPE

from lcflow.common.features import fill_gaps
from lcflow.defaults import default
from lcflow.labels.sample_settings import CleanSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Cleaning:
    """How samples are judged: the config's ``sample.clean`` and the judging forests' seed (``sample.seed``).
    ``min_label_probability`` 0 turns cleaning off; ``reference_data``: clean labels that come from the
    user's own reference data too (surveyed labels are not CORINE's 25 ha generalisation: on the real
    Slovenia field polygons cleaning gained nothing and took half of the rare classes, see
    benchmarks/studies/label_cleaning_on_real_polygons.py)."""

    settings: CleanSettings = field(default_factory=CleanSettings)
    seed: int = default("sample.seed")

    @property
    def enabled(self) -> bool:
        return self.settings.min_label_probability > 0

    def off(self) -> Cleaning:
        """The same cleaning turned off."""
        return replace(self, settings=replace(self.settings, min_label_probability=0.0))

    def forests(self, n_groups: int) -> JudgingForests:
        """The forests that judge samples of ``n_groups`` spatial blocks (no more folds than blocks)."""
        s = self.settings
        return JudgingForests(min(s.folds, n_groups), s.trees, self.seed, s.tree_rows)

    def record(self) -> dict[str, object]:
        """What a samples table's metadata says of the cleaning, its keys in the order tables have always
        had them: a table's bytes name the HPO study trained on it (``lcflow.tune.tuning.study_name``)."""
        fields = asdict(self.settings)
        first = ("min_label_probability", "folds", "max_drop_fraction", "trees")
        return {**{k: fields.pop(k) for k in first}, "seed": self.seed, **fields}


@dataclass(frozen=True)
class JudgingForests:
    """Out-of-fold forests, each trained on all groups but a fold's, so that each sample is judged unseen."""

    folds: int  # how many folds the groups are dealt into
    trees: int  # trees of each fold's forest
    seed: int  # the folds' and forests' seed
    #: each tree grows on at most this many of its fold's rows (drawn with replacement; None: a bootstrap
    #: sample of them all), which bounds a fold's time and memory however large the table
    max_rows: int | None = None


def forest_rows(series: np.ndarray) -> np.ndarray:
    """The judging forest's input: each sample's series (samples, steps, bands) with its gaps filled along
    time, a band never observed set to 0, flattened to one row (samples, steps * bands)."""
    return np.nan_to_num(fill_gaps(series), nan=0.0).reshape(len(series), -1)


def out_of_fold_proba(
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    forests: JudgingForests,
    n_jobs: int = -1,
    *,
    only: Collection[int] | None = None,
    what: str = "out-of-fold forests",
) -> tuple[np.ndarray, np.ndarray]:
    """(class probabilities of each sample, the classes of their columns: ``np.unique(y)``) from forests
    that were trained on the other groups only; a class missing from those has probability 0. Each
    fold's fit is logged, with the time left.

    Args:
        x: (samples, features) without NaN.
        y: each sample's label.
        groups: each sample's group (its spatial block): a fold holds out whole groups.
        forests: the folds, and the trees of each fold's forest.
        n_jobs: scikit-learn's processes for a forest (-1: every core).
        only: the folds to fit (the rows the others hold out stay 0), so that processes can share them out
            and sum what they found; None: all.
        what: names the fits in the log.
    """
    folds, trees, seed, max_rows = forests.folds, forests.trees, forests.seed, forests.max_rows
    classes = np.unique(y)
    proba = np.zeros((len(y), classes.size))
    todo = [f for f in range(folds) if only is None or f in only]
    started = time.monotonic()
    for fold, (train, held) in enumerate(GroupKFold(n_splits=folds).split(x, y, groups)):
        if fold not in todo:
            continue
        per_tree = None if max_rows is None or max_rows >= len(train) else max_rows
        forest = RandomForestClassifier(
            trees, n_jobs=n_jobs, random_state=seed, max_samples=per_tree
        )
        forest.fit(x[train], y[train])
        proba[np.ix_(held, np.searchsorted(classes, forest.classes_))] = forest.predict_proba(
            x[held]
        )
        done = todo.index(fold) + 1
        elapsed = time.monotonic() - started
        nodes = sum(e.tree_.node_count for e in forest.estimators_)
        log.info(
            "%s: fold %d (%d of %d here): %d trees on %d rows (each on %s), %d nodes, %.0f MB; %.0f s elapsed, "
            "%.0f s left",
            what,
            fold,
            done,
            len(todo),
            trees,
            len(train),
            f"{per_tree} drawn from them" if per_tree else "a bootstrap of them",
            nodes,
            forest_bytes(forest) / 1e6,
            elapsed,
            elapsed / done * (len(todo) - done),
        )
        del forest  # freed before the next fold's grows
    return proba, classes


def forest_bytes(forest: RandomForestClassifier) -> int:
    """The bytes a fitted forest's trees hold (their node records and class-count rows)."""
    trees = [e.tree_ for e in forest.estimators_]
    return sum(t.node_count for t in trees) * NODE_DTYPE.itemsize + sum(
        t.value.nbytes for t in trees
    )


def out_of_fold_probability(
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    forests: JudgingForests,
    what: str = "out-of-fold forests",
) -> tuple[np.ndarray, np.ndarray]:
    """(probability of each sample's own label, the most likely class) from forests that were trained
    on the other groups only (:func:`out_of_fold_proba`).

    Args:
        x: (samples, features) without NaN.
        y: each sample's label.
        groups: each sample's spatial block.
        forests: the folds, and the trees of each fold's forest.
        what: names the fits in the log.
    """
    proba, classes = out_of_fold_proba(x, y, groups, forests, what=what)
    own = proba[np.arange(len(y)), np.searchsorted(classes, y)]
    return own, classes[proba.argmax(axis=1)]


def noisy(
    x: np.ndarray, y: np.ndarray, groups: np.ndarray, cleaning: Cleaning, where: str
) -> np.ndarray:
    """Which samples to drop as mislabelled (a boolean mask).

    Args:
        x: (samples, features) without NaN.
        y: each sample's label.
        groups: each sample's spatial block (the out-of-fold forests hold out whole blocks).
        cleaning: the label probability below which a sample goes, and how much of a class may go.
        where: the tile-year, named in the log and the warnings.
    """
    drop = np.zeros(len(y), dtype=bool)
    n_groups = np.unique(groups).size
    if not cleaning.enabled or len(y) == 0:
        return drop
    if n_groups < 2 or np.unique(y).size < 2:
        log.warning(
            "%s: label cleaning skipped (%d spatial block(s), %d class(es): nothing to judge against)",
            where,
            n_groups,
            np.unique(y).size,
        )
        return drop
    own, likeliest = out_of_fold_probability(
        x, y, groups, cleaning.forests(n_groups), what=f"{where}: label cleaning"
    )
    suspect = (own < cleaning.settings.min_label_probability) & (likeliest != y)
    for c in np.unique(y):
        members = np.flatnonzero(y == c)
        flagged = members[suspect[members]]
        cap = int(np.floor(cleaning.settings.max_drop_fraction * members.size))
        if flagged.size > cap:
            log.warning(
                "%s: class %d: %d of %d samples contradict their label; only the %d least likely are "
                "dropped (max_drop_fraction %.2f)",
                where,
                c,
                flagged.size,
                members.size,
                cap,
                cleaning.settings.max_drop_fraction,
            )
            flagged = flagged[np.argsort(own[flagged], kind="stable")[:cap]]
        drop[flagged] = True
    return drop
