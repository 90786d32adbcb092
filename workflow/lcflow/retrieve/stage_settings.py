"""The stage-in's settings: the config's ``stage`` section, one field a key (docs/reference/config.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lcflow.common.settings import ConfigSection
from lcflow.defaults import default


@dataclass(frozen=True, kw_only=True)
class StageSettings(ConfigSection):
    """Where scene files are fetched to, which ones, how many at a time; and, for the rules, where the
    stage-in runs and whether its files outlive their cube. Each field is the config key of its name, and
    defaults to the schema's default."""

    SECTION: ClassVar[str] = "stage"
    RULE_KEYS: ClassVar[frozenset[str]] = frozenset({"where", "slurm_partition", "keep"})

    mode: str = default("stage.mode")
    dir: str = default("stage.dir")
    connections: int = default("stage.connections")
    where: str = default("stage.where")
    slurm_partition: str | None = default("stage.slurm_partition")
    keep: bool = default("stage.keep")
