"""A fitted scikit-learn forest's class probabilities through a compiled traversal (numba).

Why: mapping a tile-year is the forest's heaviest work, and scikit-learn walks each pixel down each tree
with a branch per split, which the CPU mispredicts about half the time. Here a block of pixels goes
down one tree in lockstep, each step a load and a comparison whose outcome picks the next node by
index, not by branch; leaves point to themselves, so a pixel that reached its leaf stays there while the
rest of the block goes on. After the tree's median leaf depth (from training) only the pixels still at
an inner node are stepped. A forest grown until its leaves are pure (lcflow's default) votes: a pure
leaf adds one to its class, read from a small table of one integer per node, instead of a row of class
fractions from a table that does not stay in cache (a third of the time before). The compiled-forest
libraries measured on lcflow's forests were slower than scikit-learn on a CPU, or changed classes
(``benchmarks/forest_inference.py``).

Same probabilities as ``RandomForestClassifier.predict_proba``: scikit-learn compares the float32 input
with float64 thresholds; each threshold here is the largest float32 at or under it, for which ``x <= t``
holds for exactly the same float32 ``x``. Trees' leaf fractions are summed in float64 and divided by the
number of trees, as scikit-learn does; a pure leaf's fractions are one 1.0 and zeros, so its vote is the
same sum. Rows with a missing value go to scikit-learn, whose trees send NaN down the side learnt for
each split.
"""

import os
from collections.abc import Callable

import numba
import numpy as np
from sklearn.ensemble import RandomForestClassifier

#: the inputs of the pixels that go down a tree together: each tree's nodes, loaded into cache, serve
#: every pixel of the block, so a larger block reads the forest fewer times, until its inputs no longer
#: stay in cache (3,971 pixels of 132 float32 features; docs/benchmarks.md, "Speed, memory and scale")
BLOCK_BYTES = 2 * 2**20
#: the fewest pixels of a block, and blocks a thread at least, so that every core has work
MIN_BLOCK, BLOCKS_A_THREAD = 256, 4


class CompiledForest:
    """The trees of ``forest`` as flat node arrays, and its class probabilities computed from them."""

    def __init__(self, forest: RandomForestClassifier):
        if forest.n_outputs_ != 1:
            raise ValueError(
                f"a compiled forest predicts one output; this forest has {forest.n_outputs_}"
            )
        self.forest = forest
        self.n_features = forest.n_features_in_
        feature, threshold, child, leaf_class, impure, roots, first = [], [], [], [], [], [], []
        offset = n_impure = 0
        for estimator in forest.estimators_:
            tree = estimator.tree_
            n = tree.node_count
            leaf = tree.children_left < 0
            own = np.arange(n) + offset
            feature.append(np.where(leaf, 0, tree.feature).astype(np.uint32))
            threshold.append(
                np.where(leaf, np.float32(np.inf), float32_at_or_under(tree.threshold))
            )
            # [child if x <= t, child if x > t]; a leaf is its own child
            pair = np.empty((n, 2), np.uint32)
            pair[:, 0] = np.where(leaf, own, tree.children_left + offset)
            pair[:, 1] = np.where(leaf, own, tree.children_right + offset)
            child.append(pair.ravel())
            fractions = tree.value[leaf, 0, :].astype(np.float64)
            total = fractions.sum(axis=1, keepdims=True)
            fractions /= np.where(total == 0.0, 1.0, total)
            pure = (fractions > 0).sum(axis=1) == 1
            leaves = np.flatnonzero(leaf)
            mixed = leaves[~pure]
            label = np.zeros(n, np.int64)  # an inner node's entry is never read
            label[leaves[pure]] = fractions[pure].argmax(axis=1)
            label[mixed] = -1 - (n_impure + np.arange(len(mixed)))
            leaf_class.append(label)
            impure.append(fractions[~pure])
            n_impure += len(mixed)
            roots.append(offset)
            first.append(_median_leaf_depth(tree))
            offset += n
        if offset >= 2**32:
            raise ValueError(
                f"a compiled forest holds fewer than 2**32 nodes; this one has {offset}"
            )
        self.feature = np.concatenate(feature)
        self.threshold = np.concatenate(threshold)
        self.child = np.concatenate(child)
        #: per node: the class of a pure leaf, or -1 - its row in ``impure`` (a leaf of several classes)
        self.leaf_class = np.concatenate(leaf_class).astype(np.int32)
        self.impure = np.ascontiguousarray(np.concatenate(impure)).reshape(-1, forest.n_classes_)
        self.roots = np.asarray(roots, np.uint32)
        self.first = np.asarray(first, np.int64)

    def predict_proba(
        self,
        x: np.ndarray,
        threads: int | None = None,
        block: int | None = None,
        walk: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> np.ndarray:
        """Class probabilities (rows, forest.classes_) as float64, as ``forest.predict_proba(x)`` gives
        them, on ``threads`` cores (None: the cores this process may run on), ``block`` rows going down a
        tree together (None: ``block_rows``'s choice; the probabilities are the same at any). ``walk``
        computes the complete rows' probabilities instead (tensor_forest's, on a GPU)."""
        x = np.ascontiguousarray(np.asarray(x).reshape(len(x), -1), dtype=np.float32)
        if x.shape[1] != self.n_features:
            raise ValueError(
                f"the forest takes {self.n_features} features, the rows have {x.shape[1]}"
            )
        odd = ~np.isfinite(x)
        if odd.any() and np.isinf(x[odd]).any():
            raise ValueError(
                "the rows hold an infinite value, which a forest cannot split (scikit-learn refuses them too)"
            )
        missing = odd.any(axis=1)
        if missing.all():
            return self.forest.predict_proba(x)
        some_missing = bool(missing.any())
        complete = np.ascontiguousarray(x[~missing]) if some_missing else x
        proba = walk(complete) if walk is not None else self.walk(complete, threads, block)
        if not some_missing:
            return proba
        out = np.empty((len(x), self.impure.shape[1]))
        out[~missing] = proba
        out[missing] = self.forest.predict_proba(x[missing])
        return out

    def walk(
        self, x: np.ndarray, threads: int | None = None, block: int | None = None
    ) -> np.ndarray:
        """Mean leaf fractions over the trees for each row of ``x`` (float32, no NaN), compiled."""
        cores = max(1, min(threads or len(os.sched_getaffinity(0)), numba.config.NUMBA_NUM_THREADS))
        numba.set_num_threads(cores)
        block = block or block_rows(len(x), self.n_features, cores)
        return traverse(
            x,
            self.feature,
            self.threshold,
            self.child,
            self.leaf_class,
            self.impure,
            self.roots,
            self.first,
            block,
        )


def block_rows(rows: int, features: int, threads: int) -> int:
    """Pixels a block: as many as ``BLOCK_BYTES`` of float32 inputs hold, fewer where ``rows`` would
    otherwise give a thread fewer than ``BLOCKS_A_THREAD`` blocks, never under ``MIN_BLOCK``."""
    by_bytes = BLOCK_BYTES // (4 * max(1, features))
    per_thread = -(-rows // (BLOCKS_A_THREAD * max(1, threads)))
    return max(MIN_BLOCK, min(by_bytes, per_thread))


def float32_at_or_under(threshold: np.ndarray) -> np.ndarray:
    """The largest float32 at or under each float64 threshold."""
    rounded = threshold.astype(np.float32)
    above = rounded.astype(np.float64) > threshold
    rounded[above] = np.nextafter(rounded[above], np.float32(-np.inf))
    return rounded


def _median_leaf_depth(tree) -> int:
    """The depth at or under which half the tree's training samples (by weight) reached a leaf: the
    steps every pixel takes in lockstep before only those still at an inner node go on."""
    depth = tree.compute_node_depths() - 1  # steps from the root
    leaf = tree.children_left < 0
    order = np.argsort(depth[leaf], kind="stable")
    weight = np.cumsum(tree.weighted_n_node_samples[leaf][order])
    return int(depth[leaf][order][np.searchsorted(weight, weight[-1] / 2)])


@numba.njit(parallel=True, cache=True)
def traverse(x, feature, threshold, child, leaf_class, impure, roots, first, block):
    """Mean leaf fractions over the trees for each row of ``x`` (float32, no NaN)."""
    n, m = x.shape
    k = impure.shape[1]
    out = np.empty((n, k))
    for b in numba.prange((n + block - 1) // block):
        lo = b * block
        rows = min(n, lo + block) - lo
        xb = x[lo : lo + rows].ravel()
        node = np.empty(rows, np.uint32)
        active = np.empty(rows, np.uint32)
        total = np.zeros((rows, k))
        for t in range(roots.shape[0]):
            for j in range(rows):
                node[j] = roots[t]
            for _ in range(first[t]):  # every row, a step each: no branch on the split
                for j in range(rows):
                    nd = node[j]
                    right = np.uint32(xb[np.uint32(j * m) + feature[nd]] > threshold[nd])
                    node[j] = child[2 * nd + right]
            count = 0
            for j in range(rows):  # the rows still at an inner node (a leaf is its own child)
                active[count] = j
                count += child[2 * node[j]] != node[j]
            while count > 0:
                still = 0
                for a in range(count):
                    j = active[a]
                    nd = node[j]
                    right = np.uint32(xb[np.uint32(j * m) + feature[nd]] > threshold[nd])
                    nd = child[2 * nd + right]
                    node[j] = nd
                    active[still] = j
                    still += child[2 * nd] != nd
                count = still
            for j in range(rows):
                c = leaf_class[node[j]]
                if c >= 0:  # a pure leaf: its fractions are 1.0 for its class, 0 for the others
                    total[j, c] += 1.0
                else:
                    for c2 in range(k):
                        total[j, c2] += impure[-1 - c, c2]
        for j in range(rows):
            for c in range(k):
                out[lo + j, c] = total[j, c] / roots.shape[0]
    return out
