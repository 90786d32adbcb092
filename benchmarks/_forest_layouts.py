"""Other node layouts for the compiled forest's traversal, timed beside lcflow's on the same trees and rows.

A map's forest (a seed-size one holds ~9 M nodes) is far larger than a core's cache, and each step down a
tree is a dependent load; these are the layouts that could have made the steps cheaper, each checked to
give the same probabilities:
- feature-major: each block's inputs transposed, so that pixels at the same node read neighbouring values;
- hot-first records: a node's feature, threshold, far child and leaf class in one 16-byte record, nodes in
  depth-first order with the child more training samples went to placed right after its parent (so the
  likely path runs through consecutive records), the other child by index.
Also printed: the steps a pixel takes down a tree in lockstep against the depth of the leaf it reaches.
Used by ``forest_size.py --layouts`` on a forest of the seed study's size.
"""

import numba
import numpy as np
from shared import seconds_in_turns

from lcflow.train.models.compiled_forest import block_rows, float32_at_or_under, traverse


@numba.njit(parallel=True, cache=True)
def traverse_feature_major(x, feature, threshold, child, leaf_class, impure, roots, first, block):
    """compiled_forest.traverse with each block's inputs transposed (feature, pixel)."""
    n, m = x.shape
    k = impure.shape[1]
    out = np.empty((n, k))
    for b in numba.prange((n + block - 1) // block):
        lo = b * block
        rows = min(n, lo + block) - lo
        xb = np.ascontiguousarray(x[lo:lo + rows].T).ravel()
        node = np.empty(rows, np.uint32)
        active = np.empty(rows, np.uint32)
        total = np.zeros((rows, k))
        for t in range(roots.shape[0]):
            for j in range(rows):
                node[j] = roots[t]
            for _ in range(first[t]):
                for j in range(rows):
                    nd = node[j]
                    node[j] = child[2 * nd + np.uint32(xb[np.uint32(feature[nd] * rows + j)] > threshold[nd])]
            count = 0
            for j in range(rows):
                active[count] = j
                count += child[2 * node[j]] != node[j]
            while count > 0:
                still = 0
                for a in range(count):
                    j = active[a]
                    nd = node[j]
                    nd = child[2 * nd + np.uint32(xb[np.uint32(feature[nd] * rows + j)] > threshold[nd])]
                    node[j] = nd
                    active[still] = j
                    still += child[2 * nd] != nd
                count = still
            _add_leaves(total, node, leaf_class, impure, rows, k)
        for j in range(rows):
            for c in range(k):
                out[lo + j, c] = total[j, c] / roots.shape[0]
    return out


@numba.njit(parallel=True, cache=True)
def traverse_hot_first(x, record, leaf_class, impure, roots, first, block):
    """compiled_forest.traverse over 16-byte records [threshold, feature | far-is-left << 31, far child,
    leaf class]: the near child is the next record (the leaf classes also apart, contiguous)."""
    n, m = x.shape
    k = impure.shape[1]
    out = np.empty((n, k))
    thr = record.view(np.float32)
    for b in numba.prange((n + block - 1) // block):
        lo = b * block
        rows = min(n, lo + block) - lo
        xb = x[lo:lo + rows].ravel()
        node = np.empty(rows, np.uint32)
        active = np.empty(rows, np.uint32)
        total = np.zeros((rows, k))
        for t in range(roots.shape[0]):
            for j in range(rows):
                node[j] = roots[t]
            for _ in range(first[t]):
                for j in range(rows):
                    nd = node[j]
                    meta = record[nd, 1]
                    far = np.uint32(xb[np.uint32(j * m) + (meta & 0x7fffffff)] > thr[nd, 0]) ^ (meta >> 31)
                    node[j] = nd + np.uint32(1) + far * (record[nd, 2] - nd - np.uint32(1))
            count = 0
            for j in range(rows):
                active[count] = j
                count += record[node[j], 2] != node[j]
            while count > 0:
                still = 0
                for a in range(count):
                    j = active[a]
                    nd = node[j]
                    meta = record[nd, 1]
                    far = np.uint32(xb[np.uint32(j * m) + (meta & 0x7fffffff)] > thr[nd, 0]) ^ (meta >> 31)
                    nd = nd + np.uint32(1) + far * (record[nd, 2] - nd - np.uint32(1))
                    node[j] = nd
                    active[still] = j
                    still += record[nd, 2] != nd
                count = still
            _add_leaves(total, node, leaf_class, impure, rows, k)
        for j in range(rows):
            for c in range(k):
                out[lo + j, c] = total[j, c] / roots.shape[0]
    return out


@numba.njit(cache=True)
def _add_leaves(total, node, leaf_class, impure, rows, k):
    for j in range(rows):
        c = leaf_class[node[j]]
        if c >= 0:
            total[j, c] += 1.0
        else:
            for c2 in range(k):
                total[j, c2] += impure[-1 - c, c2]


def hot_first_records(compiled) -> tuple[np.ndarray, np.ndarray]:
    """``compiled``'s forest as hot-first records (traverse_hot_first) and each tree's first record."""
    records, roots, offset = [], [], 0
    for t, estimator in enumerate(compiled.forest.estimators_):
        tree = estimator.tree_
        left, right, weight = tree.children_left, tree.children_right, tree.weighted_n_node_samples
        order, stack = [], [0]
        while stack:
            nd = stack.pop()
            order.append(nd)
            if left[nd] >= 0:
                near, far = (right[nd], left[nd]) if weight[right[nd]] > weight[left[nd]] else (left[nd], right[nd])
                stack += [far, near]
        order = np.asarray(order)
        n = len(order)
        renumbered = np.empty(n, np.int64)
        renumbered[order] = np.arange(n)
        leaf = left[order] < 0
        far_is_left = ~leaf & (weight[np.maximum(right[order], 0)] > weight[np.maximum(left[order], 0)])
        far = np.where(far_is_left, left[order], right[order])
        record = np.zeros((n, 4), np.uint32)
        record[:, 0] = np.where(leaf, np.float32(-np.inf), float32_at_or_under(tree.threshold[order])).astype(
            np.float32).view(np.uint32)  # a leaf: every value is over it, and its far child is itself
        record[:, 1] = np.where(leaf, 0, tree.feature[order]).astype(np.uint32) | (far_is_left.astype(np.uint32) << 31)
        record[:, 2] = np.where(leaf, np.arange(n), renumbered[np.maximum(far, 0)]) + offset
        record[:, 3] = compiled.leaf_class[compiled.roots[t] + order].view(np.uint32)
        records.append(record)
        roots.append(offset)
        offset += n
    return np.concatenate(records), np.asarray(roots, np.uint32)


def layouts_against(compiled, x: np.ndarray, rounds: int = 3) -> dict:
    """Rates (px/s) of lcflow's traversal and the other layouts, in turns, at lcflow's block; whether each
    gives the same probabilities; and the mean steps a pixel takes down a tree against its leaf's depth."""
    rows = np.ascontiguousarray(x.reshape(len(x), -1), dtype=np.float32)
    block = block_rows(len(rows), rows.shape[1], numba.get_num_threads())
    arrays = (compiled.feature, compiled.threshold, compiled.child, compiled.leaf_class, compiled.impure,
              compiled.roots, compiled.first)
    record, roots = hot_first_records(compiled)
    leaf_class = np.ascontiguousarray(record[:, 3]).view(np.int32)
    runs = {"lcflow": lambda: traverse(rows, *arrays, block),
            "feature-major": lambda: traverse_feature_major(rows, *arrays, block),
            "hot-first records": lambda: traverse_hot_first(rows, record, leaf_class, compiled.impure, roots,
                                                            compiled.first, block)}
    reference = runs["lcflow"]()
    same = {name: bool(np.array_equal(run(), reference)) for name, run in runs.items()}
    spent = seconds_in_turns(runs, rounds)
    depths, steps, seen = [], [], {}
    for estimator, first in zip(compiled.forest.estimators_, compiled.first):
        if id(estimator) not in seen:  # a tree taken several times (forest_size.py's copies) is walked once
            seen[id(estimator)] = estimator.tree_.compute_node_depths()[estimator.apply(rows)] - 1
        depths.append(seen[id(estimator)].mean())
        steps.append(np.maximum(seen[id(estimator)], first).mean())
    return {"block": block, "same": same, "mean_leaf_depth": float(np.mean(depths)), "mean_steps": float(np.mean(steps)),
            "px_s": {name: len(rows) / float(np.median(s)) for name, s in spent.items()},
            "ratios_by_round": {name: [a / b for a, b in zip(spent["lcflow"], s)] for name, s in spent.items()}}
