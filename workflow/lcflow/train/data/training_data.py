"""A samples table made ready for a model: read and checked, its validation rows (carved from the
training rows in spatial blocks where the table has none), the scaling fitted on the training rows, the
model's inputs and the classes' colours."""

import functools
import logging
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lcflow.common.features import Standardiser, prepare, prepare_patches, with_position
from lcflow.errors import LcflowError
from lcflow.labels import samples_table
from lcflow.labels.nomenclature import clc_level
from lcflow.train.data import forest_teacher
from lcflow.train.models import hyperparameters

log = logging.getLogger("lcflow.train")

#: largest spatial block when validation rows are carved out of the training rows (metres, pixels)
BLOCK_M, BLOCK_PX = 320.0, 32


def class_colors(
    table: samples_table.SampleTable, classes: list[int]
) -> dict[int, tuple[int, int, int]]:
    """Class colours from the table, else CORINE's where the codes are CLC codes, else a palette."""
    given = {int(k): tuple(v) for k, v in table.meta.get("class_colors", {}).items() if v}
    clc = {**clc_level(1).colors, **clc_level(2).colors, **clc_level(3).colors}
    palette = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ]
    return {
        c: given.get(c) or clc.get(c) or palette[i % len(palette)] for i, c in enumerate(classes)
    }


@dataclass
class Prepared:
    """A samples table made ready for a model: split, standardised, in the model's input form."""

    table: samples_table.SampleTable
    names: str
    classes: list[int]
    standardise: Standardiser
    x: np.ndarray
    y: np.ndarray
    x_val: np.ndarray | None
    y_val: np.ndarray | None
    counts: np.ndarray  # training samples per class
    n_train: int
    validation: dict[str, Any]
    #: the spatial block of each train row, then of each val row (None: no positions)
    blocks: np.ndarray | None = None

    @property
    def train_blocks(self) -> np.ndarray | None:
        """The spatial block of each train row (None: no positions)."""
        return None if self.blocks is None else self.blocks[: len(self.y)]

    @functools.cached_property
    def teacher(self) -> forest_teacher.ForestTeacher:
        """The forest teacher of the train rows (``distill``), one for every model trained on them."""
        return forest_teacher.ForestTeacher(self.x, self.y, self.train_blocks, len(self.classes))

    @property
    def val_rows(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The val rows' input and classes, or None where there are none."""
        if self.x_val is None or self.y_val is None or not len(self.x_val):
            return None
        return self.x_val, self.y_val


def prepare_data(
    cls, model_name: str, sample_paths: list[str], params: dict[str, Any], carve: bool
) -> Prepared:
    """Read and check the samples, set validation rows aside (carved from train when the table has
    none and ``carve``), fit the scaling on train and build the model's inputs."""
    names = ", ".join(map(str, sample_paths))
    table = samples_table.read(sample_paths)
    if cls.input_kind == "patch" and not table.patch_size:
        raise LcflowError(
            f"model {model_name} trains on patches: samples table(s) {names} "
            "have none (set sample.patch_px, e.g. 11)"
        )
    has_split = "split" in table.frame.columns
    train_part = _observed(table.split("train"), "train", names)
    val_part = _observed(table.split("val"), "val", names) if has_split else None
    if len(train_part.frame) == 0:
        raise LcflowError(f"samples table(s) {names}: no 'train' rows with an observation")
    classes = train_part.classes
    if len(classes) < 2:
        raise LcflowError(f"samples table(s) {names}: the train split has one class only")
    validation = {"source": "val rows of the table"}
    if carve and (val_part is None or len(val_part.frame) == 0):
        # a deep model selects its round on val (a study compares trials on it): without val rows, set some
        # training rows aside (a forest has no val_fraction of its own: the deep models' default)
        fraction = params.get("val_fraction", hyperparameters.TRAINING["val_fraction"].default)
        train_part, val_part, validation = carve_validation(train_part, fraction, params["seed"])
        log.info(
            "no val rows: %d of the training rows set aside for validation (%s)",
            len(val_part.frame),
            validation["method"],
        )
    index = {c: i for i, c in enumerate(classes)}
    standardise = Standardiser.fit(train_part.features())
    x = model_input(cls, train_part, standardise, names)
    y = train_part.frame["label"].map(index).to_numpy()
    x_val = y_val = None
    frames = [train_part.frame]
    if val_part is not None and len(val_part.frame):
        keep = val_part.frame["label"].isin(classes).to_numpy()
        x_val = model_input(cls, val_part, standardise, names)[keep]
        y_val = val_part.frame["label"][keep].map(index).to_numpy()
        frames.append(val_part.frame[keep])
    counts = np.bincount(y, minlength=len(classes)).astype(float)
    blocks = spatial_blocks(pd.concat(frames, ignore_index=True))
    return Prepared(
        table,
        names,
        classes,
        standardise,
        x,
        y,
        x_val,
        y_val,
        counts,
        int(len(train_part.frame)),
        validation,
        None if blocks is None else blocks[0],
    )


def _observed(part: samples_table.SampleTable, split: str, names: str) -> samples_table.SampleTable:
    """Rows with at least one observation; the others are dropped, and the log says how many."""
    seen = part.observed()
    if not seen.all():
        log.warning(
            "samples table(s) %s: %d of %d %s rows have no observation at all and are left out",
            names,
            int((~seen).sum()),
            len(seen),
            split,
        )
    return part.rows(seen)


def spatial_blocks(frame: pd.DataFrame) -> tuple[np.ndarray, tuple[str, str], float] | None:
    """Each row's spatial block (an integer per tile, year and square of BLOCK_M m, or BLOCK_PX px, at most a
    tenth of the samples' extent), the position columns used and the square's side; None when the table
    gives no sample positions (x/y, else row/col)."""
    coords = next(
        ((a, b) for a, b in (("x", "y"), ("col", "row")) if {a, b} <= set(frame.columns)), None
    )
    if coords is None:
        return None
    keys = [frame[c].to_numpy() for c in ("tile", "year") if c in frame.columns]
    u, v = frame[coords[0]].to_numpy(float), frame[coords[1]].to_numpy(float)
    extent = max(np.ptp(u), np.ptp(v)) if len(frame) else 0.0
    side = min(BLOCK_M if coords[0] == "x" else BLOCK_PX, extent / 10) or 1.0
    keys += [np.floor(u / side), np.floor(v / side)]
    return pd.MultiIndex.from_arrays(keys).factorize()[0], coords, side


def carve_validation(
    part: samples_table.SampleTable, fraction: float, seed: int
) -> tuple[samples_table.SampleTable, samples_table.SampleTable, dict[str, Any]]:
    """Set ``fraction`` of the training rows aside for validation, stratified by class and, where the
    table says where its samples lie (x/y, else row/col), in whole spatial blocks: neighbours of a
    validation sample do not train, so the selected round is not flattered by autocorrelation."""
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    frame = part.frame
    labels = frame["label"].to_numpy()
    folds = max(2, int(round(1 / fraction)))
    blocks = spatial_blocks(frame)
    val, method = None, "stratified by class (the table gives no sample positions)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # classes rarer than the number of folds
        if blocks is not None:
            groups, coords, side = blocks
            splitter = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)
            candidates = (
                [fold for _, fold in splitter.split(frame, labels, groups)]
                if groups.max() >= folds
                else []
            )
            val = _most_classes(labels, candidates, fraction)
            unit = "m" if coords[0] == "x" else "px"
            method = f"stratified by class, in spatial blocks of {side:g} {unit} ({coords[0]}/{coords[1]})"
            if val is None:
                method = (
                    f"stratified by class (in spatial blocks of {side:g} {unit} no split kept every class in "
                    f"train and two in validation: the classes lie in too few blocks)"
                )
        if val is None:
            splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
            _, val = next(splitter.split(frame, labels))
    is_val = np.zeros(len(frame), dtype=bool)
    is_val[val] = True
    info = {"source": "carved from train", "method": method, "fraction": fraction}
    return part.rows(~is_val), part.rows(is_val), info


def _most_classes(
    labels: np.ndarray, candidates: list[np.ndarray], fraction: float
) -> np.ndarray | None:
    """Of the candidate validation rows that leave every class some training rows, those holding the
    most classes, each class's share nearest ``fraction``; None when none holds two classes."""
    classes, totals = np.unique(labels, return_counts=True)
    best, best_key = None, (1, 0.0)
    for rows in candidates:
        in_val = np.array([(labels[rows] == c).sum() for c in classes])
        if (in_val >= totals).any():
            continue
        key = ((in_val > 0).sum(), -float(np.abs(in_val / totals - fraction).max()))
        if key > best_key:
            best, best_key = rows, key
    return best


def model_input(
    cls, part: samples_table.SampleTable, standardise: Standardiser, where: str = "samples table"
) -> np.ndarray:
    """What a model of class ``cls`` trains on: prepared pixel series (with each row's position for a model
    that uses it), or prepared patches."""
    if cls.input_kind == "patch":
        return prepare_patches(part.patches(), standardise)[0]
    prepared = prepare(part.features(), standardise)[0]
    return with_position(prepared, part.latlon(where)) if cls.uses_position else prepared
