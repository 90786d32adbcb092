"""The cube's settings: the config's ``cube`` section, one field a key (docs/reference/config.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from lcflow.common.settings import ConfigSection
from lcflow.defaults import default
from lcflow.errors import LcflowError
from lcflow.retrieve import sentinel2, time_grid


@dataclass(frozen=True, kw_only=True)
class CubeSettings(ConfigSection):
    """What a cube is made of and how: its bands and indices, grid, time steps and cloud mask, windows and
    reading. Each field is the config key of its name, and defaults to the schema's default."""

    SECTION: ClassVar[str] = "cube"

    bands: tuple[str, ...] = tuple(default("cube.bands"))
    resolution: float = default("cube.resolution")
    mask: str = default("cube.mask")
    mask_asset: str | None = default("cube.mask_asset")
    mask_clear: tuple[int, ...] = tuple(default("cube.mask_clear"))
    asset_bands: dict[str, tuple[str, ...]] = field(
        default_factory=lambda: dict(default("cube.asset_bands"))
    )
    boa_add_offset: int | None = default("cube.boa_add_offset")
    invalid_scl: tuple[int, ...] = tuple(default("cube.invalid_scl"))
    dilation_px: int = default("cube.dilation_px")
    time_steps: int = default("cube.time_steps")
    period: str | None = default("cube.period")
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
        object.__setattr__(
            self, "asset_bands", {k: tuple(v) for k, v in dict(self.asset_bands).items()}
        )
        object.__setattr__(self, "period", time_grid.check_period(self.period))
        if self.mask == "asset" and (not self.mask_asset or not self.mask_clear):
            raise LcflowError(
                "cube.mask: asset needs cube.mask_asset (the key of the product's mask asset) and "
                "cube.mask_clear (its values that are clear)"
            )
        if self.mask != "asset" and (self.mask_asset or self.mask_clear):
            raise LcflowError(
                f"cube.mask_asset and cube.mask_clear are read with cube.mask: asset, not {self.mask}"
            )

    def steps(self) -> int:
        """How many time steps a year of the cube has."""
        return time_grid.year_grid(2001, self.time_steps, self.period).steps
