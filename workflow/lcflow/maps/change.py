"""Change between two annual class maps: from-to codes, the change matrix, agreement, and (where the true
maps are known) how well the maps keep stable land stable and find real change.

From-to codes number the ordered pairs of the map's classes: ``0`` is no change, ``1 + i * K + j``
is a change from the i-th to the j-th class (class order of the model), so any class codes fit a
uint16 raster with a colour table (the colour of the class changed to). The table of codes travels
in the raster's ``change_classes`` tag and in a CSV beside it.
"""

from dataclasses import dataclass, field

import numpy as np

from lcflow.errors import LcflowError

STABLE = 0
CHANGE_NODATA = 65535
STABLE_COLOR = (225, 225, 225)


def change_codes(n_classes: int) -> dict[int, tuple[int, int]]:
    """From-to code -> (from index, to index) for every ordered pair of different classes."""
    if n_classes * n_classes + 1 >= CHANGE_NODATA:
        raise LcflowError(
            f"{n_classes} classes have too many from-to pairs for a uint16 change map"
        )
    return {
        1 + i * n_classes + j: (i, j) for i in range(n_classes) for j in range(n_classes) if i != j
    }


def change_map(
    before: np.ndarray, after: np.ndarray, valid: np.ndarray, n_classes: int
) -> np.ndarray:
    """From-to codes (uint16) of two maps of class indices; CHANGE_NODATA where either has no data."""
    code = np.where(before == after, STABLE, 1 + before.astype(np.int64) * n_classes + after)
    return np.where(valid, code, CHANGE_NODATA).astype(np.uint16)


def change_table(
    classes: list[int], names: dict[int, str], colors: dict[int, tuple[int, int, int]]
) -> list[dict]:
    """One row per from-to code: code, from and to class codes and names, colour (that of the new class)."""
    rows = [
        {"code": STABLE, "from": None, "to": None, "name": "no change", "color": list(STABLE_COLOR)}
    ]
    for code, (i, j) in change_codes(len(classes)).items():
        a, b = classes[i], classes[j]
        rows.append(
            {
                "code": code,
                "from": a,
                "to": b,
                "name": f"{names.get(a, a)} -> {names.get(b, b)}",
                "color": list(colors.get(b, (0, 0, 0))),
            }
        )
    return rows


@dataclass
class PairTally:
    """Pixel counts of one pair of years, accumulated window by window.

    ``matrix[i, j]``: pixels of class i in the first year and j in the second. Where the true maps are
    given, ``truth`` counts (truly changed, mapped as changed) pairs over pixels valid in all four.
    """

    n_classes: int
    matrix: np.ndarray = field(init=False)
    truth: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.matrix = np.zeros((self.n_classes, self.n_classes), dtype=np.int64)
        self.truth = np.zeros((2, 2), dtype=np.int64)

    def add(self, before: np.ndarray, after: np.ndarray, valid: np.ndarray) -> None:
        k = self.n_classes
        idx = before[valid].astype(np.int64) * k + after[valid]
        self.matrix += np.bincount(idx, minlength=k * k).reshape(k, k)

    def add_truth(self, changed: np.ndarray, mapped_changed: np.ndarray, valid: np.ndarray) -> None:
        idx = changed[valid].astype(np.int64) * 2 + mapped_changed[valid]
        self.truth += np.bincount(idx, minlength=4).reshape(2, 2)

    def summary(self, pixel_area_m2: float, with_truth: bool) -> dict:
        """Agreement, change fraction, change matrix (ha); with truth: stable pixels kept, change P/R/F1."""
        total = int(self.matrix.sum())
        out = {
            "pixels": total,
            "agreement": float(np.trace(self.matrix) / total) if total else None,
            "changed_fraction": float(1 - np.trace(self.matrix) / total) if total else None,
            "change_matrix_ha": np.round(self.matrix * pixel_area_m2 / 1e4, 2).tolist(),
        }
        if with_truth:
            (stable_kept, stable_flagged), (missed, found) = self.truth.tolist()
            precision = found / (found + stable_flagged) if found + stable_flagged else 0.0
            recall = found / (found + missed) if found + missed else 0.0
            out["truth"] = {
                "stable_pixels": stable_kept + stable_flagged,
                "changed_pixels": missed + found,
                "stable_kept": stable_kept / (stable_kept + stable_flagged)
                if stable_kept + stable_flagged
                else None,
                "change_precision": precision,
                "change_recall": recall,
                "change_f1": 2 * precision * recall / (precision + recall)
                if precision + recall
                else 0.0,
            }
        return out
