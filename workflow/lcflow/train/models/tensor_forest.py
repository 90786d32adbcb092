"""A fitted forest's class probabilities with its trees as torch tensors: the forest's maps on a GPU node.

Why: on a CPU each step down a tree is a dependent load from a forest far larger than the cache, and a
seed-size forest's whole tile-year stays near 18 minutes on 4 cores whatever the node layout
(docs/benchmarks.md, benchmarks/_forest_layouts.py). A GPU walks every pixel of a chunk down every tree
at once, each step four gathers over (pixels, trees): the memory bandwidth it is built for. On a CPU
this is the wrong engine (a few percent of the compiled traversal's rate).

The nodes are compiled_forest's (float32 thresholds at or under scikit-learn's, leaves their own child),
so a pixel goes down the same side at every split; leaves add their class fractions tree by tree in
float64, in the trees' order, and the sum is divided by the number of trees: the probabilities are
``CompiledForest.predict_proba``'s to the bit, on any device. Rows with a missing value go to
scikit-learn, as there.
"""

import numpy as np
import torch

from lcflow.train.models.compiled_forest import CompiledForest

#: the bytes of one (pixels, trees) int64 tensor of node numbers a chunk of rows may take: a walk holds
#: a few of them at once
CHUNK_BYTES = {"cuda": 2**31, "cpu": 2**26}
#: steps down the trees between two checks that every pixel has reached a leaf (a check waits for the device)
CHECK_EVERY = 8


class TensorForest:
    """``compiled``'s nodes as tensors on ``device``, and the class probabilities computed from them."""

    def __init__(self, compiled: CompiledForest, device: torch.device | str = "cpu"):
        self.compiled = compiled
        self.device = torch.device(device)
        n = len(compiled.feature)
        self.n_trees = len(compiled.roots)
        self.depth = max(1, max(e.tree_.max_depth for e in compiled.forest.estimators_))
        on = self.device
        self.feature = torch.as_tensor(compiled.feature.astype(np.int64), device=on)
        self.threshold = torch.as_tensor(compiled.threshold, device=on)
        self.child = torch.as_tensor(compiled.child.astype(np.int64), device=on)
        self.roots = torch.as_tensor(compiled.roots.astype(np.int64), device=on)
        # per node, its row in ``values``: a leaf's class fractions (a pure leaf's: 1.0 for its class);
        # an inner node's row is never read
        k = compiled.impure.shape[1]
        pure = compiled.leaf_class >= 0
        row = np.where(pure, compiled.leaf_class, k - 1 - compiled.leaf_class).astype(np.int64)
        self.value_row = torch.as_tensor(row, device=on)
        self.values = torch.as_tensor(
            np.concatenate([np.eye(k), compiled.impure]), dtype=torch.float64, device=on
        )
        assert row.max(initial=0) < len(self.values) and n == len(row)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities (rows, forest.classes_) as float64, as ``CompiledForest.predict_proba``
        gives them."""
        return self.compiled.predict_proba(x, walk=self.walk)

    def walk(self, x: np.ndarray) -> np.ndarray:
        """Mean leaf fractions over the trees for each row of ``x`` (float32, no NaN), a chunk of rows
        at a time."""
        chunk = max(1, CHUNK_BYTES.get(self.device.type, CHUNK_BYTES["cpu"]) // (8 * self.n_trees))
        out = np.empty((len(x), self.values.shape[1]))
        with torch.no_grad():
            for lo in range(0, len(x), chunk):
                rows = torch.as_tensor(x[lo : lo + chunk], device=self.device)
                out[lo : lo + len(rows)] = self._chunk(rows).cpu().numpy()
        return out

    def _chunk(self, x: torch.Tensor) -> torch.Tensor:
        """Every row of ``x`` down every tree in lockstep; a leaf is its own child, so rows that reached
        theirs stay while the others go on."""
        node = self.roots.expand(len(x), -1).contiguous()
        for step in range(self.depth):
            right = torch.gather(x, 1, self.feature[node]) > self.threshold[node]
            node = self.child[2 * node + right]
            if (step + 1) % CHECK_EVERY == 0 and bool((self.child[2 * node] == node).all()):
                break
        rows = self.value_row[node]
        total = torch.zeros((len(x), self.values.shape[1]), dtype=torch.float64, device=self.device)
        for t in range(self.n_trees):  # in the trees' order, as the compiled sum and scikit-learn's
            total += self.values[rows[:, t]]
        return total / self.n_trees
