"""The samples' settings: the config's ``sample`` section with its ``clean`` and ``transfer`` sections,
one field a key (docs/reference/config.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from lcflow.common.settings import ConfigSection
from lcflow.defaults import default


@dataclass(frozen=True, kw_only=True)
class CleanSettings(ConfigSection):
    """Label-noise cleaning of the train and val candidates: out-of-fold forests by spatial block."""

    SECTION: ClassVar[str] = "sample.clean"

    min_label_probability: float = default("sample.clean.min_label_probability")
    folds: int = default("sample.clean.folds")
    max_drop_fraction: float = default("sample.clean.max_drop_fraction")
    reference_data: bool = default("sample.clean.reference_data")
    tree_rows: int | None = default("sample.clean.tree_rows")
    trees: int = default("sample.clean.trees")


@dataclass(frozen=True, kw_only=True)
class TransferSettings(ConfigSection):
    """The change test of labels carried to years other than ``labels.year``."""

    SECTION: ClassVar[str] = "sample.transfer"

    mad_k: float = default("sample.transfer.mad_k")


@dataclass(frozen=True, kw_only=True)
class SampleSettings(ConfigSection):
    """How a tile-year's samples are drawn, split and checked. Each field is the config key of its name, and
    defaults to the schema's default."""

    SECTION: ClassVar[str] = "sample"

    per_class: int = default("sample.per_class")
    min_valid_fraction: float = default("sample.min_valid_fraction")
    boundary_px: int = default("sample.boundary_px")
    block_px: int = default("sample.block_px")
    patch_px: int = default("sample.patch_px")
    fractions: dict[str, Any] = field(default_factory=lambda: dict(default("sample.fractions")))
    seed: int = default("sample.seed")
    min_per_class: int = default("sample.min_per_class")
    clean: CleanSettings = field(default_factory=CleanSettings)
    transfer: TransferSettings = field(default_factory=TransferSettings)
