"""A blend: the mean of several trained models' class probabilities, used as a model of its own.

A forest and a network err on different pixels, where either is unsure: on six 500-row tables (three
draws of the real Slovenia table, three of the demo's tile-years, 5 spatial folds each) the mean of
lcflow's forest's and TempCNN's probabilities scored 0.881 where each alone scored 0.872
(``benchmarks/studies/measured/recipe_grid_blend_2core.txt``). Two networks blended gain nothing there: they err
on the same rows.

A blend's directory holds no weights: ``members.json`` names the member model directories (relative to
the blend's) and the checksum of each one's ``model.json``, so that a member retrained since is noticed;
``model.json`` records the classes, bands and steps every member shares, as any model's does, and
``metrics.json`` the blend's scores on the val and test rows and its members' training time.
"""

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from lcflow.common.atomic import write_text
from lcflow.errors import LcflowError
from lcflow.train.model_dirs.model_dir import (
    META_FILE,
    METRICS_FILE,
    TrainedModel,
    legend_from_json,
    legend_to_json,
    read_metrics,
    sha256,
)
from lcflow.train.models import Model

log = logging.getLogger("lcflow.train")

NAME = "blend"
MEMBERS_FILE = "members.json"


class Blend:
    """What callers ask of a trained model's ``model``, for a blend: its name, its input, where it runs.

    It stands in for a :class:`~lcflow.train.models.Model` (typed as one by :func:`as_model`): a
    :class:`BlendedModel` answers for its members what a model's own methods would.
    """

    name = NAME
    input_kind = "series"
    weights_file = MEMBERS_FILE

    def __init__(self, members: list[TrainedModel], names: list[str] | None = None):
        self.members = members
        self.params = {"members": names or [m.model.name for m in members]}
        self.uses_position = any(m.model.uses_position for m in members)

    def place(self, local_rank: int) -> None:
        for member in self.members:
            member.model.place(local_rank)

    @property
    def device(self):
        """The device of the first member that runs on one (a network), else None (forests only)."""
        return next((d for d in (m.model.device for m in self.members) if d is not None), None)

    def as_model(self) -> Model:
        """The blend where a trained model's ``model`` goes (see the class)."""
        return cast(Model, self)


@dataclass
class BlendedModel(TrainedModel):
    """A trained model whose probabilities are the mean of its members'; each member prepares the raw
    input its own way (its own scaling, its own position and date inputs)."""

    members: list[TrainedModel] = field(default_factory=list)

    def probabilities(
        self, x: np.ndarray, latlon: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        self._check_shape(x)
        probas, empties = zip(*(m.probabilities(x, latlon) for m in self.members))
        return np.mean(probas, axis=0), np.logical_or.reduce(empties)

    def window_inputs(
        self, x: np.ndarray, latlon: np.ndarray | None = None
    ) -> tuple[Any, np.ndarray]:
        prepared, empties = zip(*(m.window_inputs(x, latlon) for m in self.members))
        return list(prepared), np.logical_or.reduce(empties)

    def input_probabilities(self, prepared: Any) -> np.ndarray:
        return np.mean([m.input_probabilities(p) for m, p in zip(self.members, prepared)], axis=0)


def _shared(members: list[TrainedModel], dirs: list[Path]) -> None:
    """Members must map the same classes from the same input: a mean over other classes, or over
    inputs of other bands or steps, would mean nothing."""
    first = members[0]
    names: dict[str, Path] = {}
    for member, directory in zip(members, dirs):
        if member.model.name in names:
            raise LcflowError(
                f"blend members {names[member.model.name]} and {directory} are both {member.model.name} "
                "models: a blend's members are different models (its maps name each member's by model)"
            )
        names[member.model.name] = directory
    for member, directory in zip(members[1:], dirs[1:]):
        for what in ("classes", "bands", "steps"):
            if getattr(member, what) != getattr(first, what):
                raise LcflowError(
                    f"blend members {dirs[0]} and {directory} differ in their {what} "
                    f"({getattr(first, what)} against {getattr(member, what)}): blend models trained "
                    "on the same samples"
                )


def _load_members(dirs: list[Path], where: str) -> list[TrainedModel]:
    members = []
    for directory in dirs:
        try:
            kind = json.loads((directory / META_FILE).read_text()).get("model")
        except (OSError, ValueError, AttributeError):
            kind = None  # TrainedModel.load names what is wrong
        if kind == NAME:
            raise LcflowError(
                f"{where}: member {directory} is itself a blend: name its members instead"
            )
        member = TrainedModel.load(directory)
        if member.model.input_kind != "series":
            raise LcflowError(
                f"{where}: member {directory} ({member.model.name}) classifies patches; a blend "
                "averages pixel-series models"
            )
        members.append(member)
    _shared(members, dirs)
    return members


def make(
    member_dirs: list[str | Path], out: str | Path, sample_paths: list[str] | None = None
) -> dict[str, Any]:
    """Write the blend of ``member_dirs`` to ``out``, scored on the val and test rows of ``sample_paths``.

    Everything is checked before ``out`` is touched; ``model.json`` is removed first and written last."""
    out = Path(out)
    dirs = [Path(d) for d in member_dirs]
    if len(dirs) < 2:
        raise LcflowError(
            f"a blend needs two members or more (given: {', '.join(map(str, dirs)) or 'none'})"
        )
    if len({d.resolve() for d in dirs}) != len(dirs):
        raise LcflowError(f"blend members are named twice: {', '.join(map(str, dirs))}")
    if out.resolve() in {d.resolve() for d in dirs}:
        raise LcflowError(f"the blend {out} would replace its member {out}: name another directory")
    members = _load_members(dirs, f"blend {out}")
    # pandas: making a blend reads a table, loading one does not
    from lcflow.labels import samples_table
    from lcflow.train.model_dirs.evaluation import evaluate_table

    sample_paths = sample_paths or []
    table = samples_table.read(sample_paths, min_classes=1) if sample_paths else None
    first = members[0]
    blended = _blended(members)
    member_metrics = [read_metrics(d) for d in dirs]
    metrics: dict[str, Any] = {
        "model": NAME,
        "members": [m.model.name for m in members],
        "train_seconds": sum(m["train_seconds"] for m in member_metrics),
        "world_size": max(m["world_size"] for m in member_metrics),
        "member_train_seconds": {
            m.model.name: mm["train_seconds"] for m, mm in zip(members, member_metrics)
        },
    }
    if table is not None and "split" in table.frame.columns:
        for split in ("val", "test"):
            part = table.split(split)
            if len(part.frame):
                metrics[split] = evaluate_table(
                    blended, part, f"the {split} rows of {', '.join(map(str, sample_paths))}"
                )
                # else withheld for want of evidence, and said so
                if "overall_accuracy" in metrics[split]:
                    log.info(
                        "blend of %s: %s OA %.4f on %d rows",
                        ", ".join(metrics["members"]),
                        split,
                        metrics[split]["overall_accuracy"],
                        len(part.frame),
                    )
    out.mkdir(parents=True, exist_ok=True)
    (out / META_FILE).unlink(missing_ok=True)
    listed = {
        "members": [
            {
                "model": m.model.name,
                "dir": os.path.relpath(d.resolve(), out.resolve()),
                "model_json_sha256": sha256(d / META_FILE),
            }
            for m, d in zip(members, dirs)
        ]
    }
    write_text(out / MEMBERS_FILE, json.dumps(listed, indent=1))
    write_text(out / METRICS_FILE, json.dumps(metrics, indent=1))
    meta = {
        "model": NAME,
        "params": {"members": metrics["members"]},
        "bands": first.bands,
        "steps": first.steps,
        "classes": first.classes,
        **legend_to_json(first.class_names, first.class_colors),
        "time_steps": first.time_steps,
        "weights": {"file": MEMBERS_FILE, "sha256": sha256(out / MEMBERS_FILE)},
    }
    write_text(out / META_FILE, json.dumps(meta, indent=1))
    return metrics


def _blended(members: list[TrainedModel]) -> BlendedModel:
    """The blend of ``members`` (checked by :func:`_shared`): their shared classes, bands and steps."""
    first = members[0]
    return BlendedModel(
        Blend(members).as_model(),
        first.bands,
        first.steps,
        first.classes,
        first.class_names,
        first.class_colors,
        None,  # each member scales its own input
        first.time_steps,
        members=members,
    )


def listed_members(directory: str | Path) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """The members ``members.json`` names, each checked against the checksum ``model.json`` recorded for the
    file and the member's ``model.json`` against the one the blend was made from; their directories resolved.
    Also the blend's ``model.json``, which was read to check the list."""
    directory = Path(directory)
    try:
        meta = json.loads((directory / META_FILE).read_text())
        recorded = meta["weights"]
        listing = directory / recorded["file"]
        if sha256(listing) != recorded["sha256"]:
            raise LcflowError(
                f"blend {directory}: {listing.name} is not the list {META_FILE} was written with "
                "(checksum differs): run lcflow blend again"
            )
        members = json.loads(listing.read_text())["members"]
        resolved = [{**m, "dir": str(directory / m["dir"])} for m in members]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise LcflowError(
            f"{directory} is not a blend written by lcflow blend ({type(exc).__name__}: {exc})"
        ) from None
    for member in resolved:
        meta_path = Path(member["dir"]) / META_FILE
        if not meta_path.exists():
            raise LcflowError(f"blend {directory}: member {member['dir']} is gone (no {META_FILE})")
        if sha256(meta_path) != member["model_json_sha256"]:
            raise LcflowError(
                f"blend {directory}: member {member['dir']} was trained again after the blend was made "
                f"(its {META_FILE} differs): run lcflow blend again"
            )
    return resolved, meta


def load(directory: str | Path) -> BlendedModel:
    """The blend in ``directory`` with its members loaded (each checked as :func:`listed_members` says)."""
    directory = Path(directory)
    listed, _ = listed_members(directory)
    return _blended(_load_members([Path(m["dir"]) for m in listed], f"blend {directory}"))


def described(directory: str | Path) -> BlendedModel:
    """The blend as its ``model.json`` describes it, its members checked but not loaded: what publishing a
    map averaged from the members' stored probabilities needs (a forest's weights can take gigabytes)."""
    directory = Path(directory)
    listed, meta = listed_members(directory)
    try:
        return BlendedModel(
            Blend([], [m["model"] for m in listed]).as_model(),
            meta["bands"],
            meta["steps"],
            meta["classes"],
            *legend_from_json(meta),
            None,
            meta.get("time_steps"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise LcflowError(
            f"{directory / META_FILE} is not a blend written by lcflow blend ({exc!r})"
        ) from None
