"""The cube's settings: the config's ``cube`` section, one field a key (docs/reference/config.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lcflow.common.settings import ConfigSection
from lcflow.defaults import default
from lcflow.retrieve import sentinel2


@dataclass(frozen=True, kw_only=True)
class CubeSettings(ConfigSection):
    """What a cube is made of and how: its bands and indices, grid, time steps and cloud mask, windows and
    reading. Each field is the config key of its name, and defaults to the schema's default."""

    SECTION: ClassVar[str] = "cube"

    bands: tuple[str, ...] = tuple(default("cube.bands"))
    resolution: float = default("cube.resolution")
    invalid_scl: tuple[int, ...] = tuple(default("cube.invalid_scl"))
    dilation_px: int = default("cube.dilation_px")
    time_steps: int = default("cube.time_steps")
    block_px: int = default("cube.block_px")
    min_clear_fraction: float = default("cube.min_clear_fraction")
    read_threads: int = default("cube.read_threads")
    cache_mb: int = default("cube.cache_mb")
    indices: tuple[str, ...] = tuple(default("cube.indices"))
    fill_gaps: str = default("cube.fill_gaps")

    def __post_init__(self) -> None:
        # before the schema: its messages name the band at fault
        sentinel2.check_bands(list(self.bands))
        super().__post_init__()
