"""The consistent maps' settings: the config's ``consistency`` section, one field a key
(docs/reference/config.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lcflow.common.settings import ConfigSection
from lcflow.defaults import default


@dataclass(frozen=True, kw_only=True)
class ConsistencySettings(ConfigSection):
    """How sure a change between years must be, and how large, before a consistent map series keeps it.
    Each field is the config key of its name, and defaults to the schema's default."""

    SECTION: ClassVar[str] = "consistency"

    evidence_ratio: float = default("consistency.evidence_ratio")
    min_change_ha: float = default("consistency.min_change_ha")
