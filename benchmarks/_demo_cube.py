"""The demo's tile-years as the workflow makes them (demo scenes -> STAC search -> cube -> CORINE level-2
labels), for the benchmarks that need its rasters or samples: one place for its tiles, years and bands."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rasterio

from lcflow.labels import alignment as labels
from lcflow.labels import nomenclature, sampling
from lcflow.retrieve import cube, search
from lcflow.synth.demo import make_demo

#: config/config.yaml's areas (EPSG:32631 and EPSG:32632), years and bands
DEMO_AOI = {"31UFT": [640000, 5760000, 642560, 5762560], "32ULC": [330000, 5700000, 332560, 5702560]}
YEARS = (2018, 2019)
BANDS = ["B02", "B03", "B04", "B05", "B06", "B07", "B08", "B8A", "B11", "B12"]


@dataclass(frozen=True)
class TileYear:
    """One demo tile-year's rasters: ``dir`` holds cube.tif and valid.tif; the labels are the tile's."""

    tile: str
    year: int
    dir: Path
    labels: Path
    truth: Path

    @property
    def cube(self) -> Path:
        return self.dir / "cube.tif"

    @property
    def valid(self) -> Path:
        return self.dir / "valid.tif"


def demo_tiles(work: Path, tiles: tuple[str, ...] = tuple(DEMO_AOI), years: tuple[int, ...] = YEARS,
               side: int = 256) -> list[TileYear]:
    """The demo's ``tiles`` x ``years`` under ``work`` (``work/TILE/YEAR``), made where they are missing: a
    second call on the same ``work`` reuses them. ``side``: pixels a side of each tile's square (the demo
    config's 256, from the same corner); the labels are aligned to each tile's first year's cube, as the
    workflow aligns them."""
    aoi = {t: [*DEMO_AOI[t][:2], DEMO_AOI[t][0] + side * 10, DEMO_AOI[t][1] + side * 10] for t in tiles}
    catalog = work / "demo" / "catalog" / "catalog.json"
    if not all((work / "demo" / "truth" / f"{t}_{y}.tif").exists() for t in tiles for y in years):
        make_demo(work / "demo", aoi, list(years))
    out = []
    for tile in tiles:
        for year in years:
            d = work / tile / str(year)
            if not (d / "cube.tif").exists():
                search.run(tile, year, d / "items.json", catalog=str(catalog))
                cube.run(d / "items.json", tile, year, d / "cube.tif", d / "valid.tif", bands=BANDS,
                         bounds=aoi[tile])
        aligned = work / tile / "labels.tif"
        if not aligned.exists():
            labels.run(work / "demo" / "corine" / "clc_demo_3035.tif", work / tile / str(years[0]) / "cube.tif",
                       aligned, nomenclature.clc_level(2))
        out += [TileYear(tile, year, work / tile / str(year), aligned, work / "demo" / "truth" / f"{tile}_{year}.tif")
                for year in years]
    return out


def cube_series(cube_path: Path) -> np.ndarray:
    """Every pixel of a cube as a series (pixels, steps, bands), NaN where the cube has no value."""
    with rasterio.open(cube_path) as src:
        raw = src.read().reshape(src.count, -1).T
        values = raw.astype(np.float32)
        values[raw == src.nodata] = np.nan
    return values.reshape(len(values), -1, len(BANDS))


def demo_cube(work: Path, **draw) -> tuple[Path, Path]:
    """31UFT 2018's cube and its samples table (sampling's defaults, or ``draw``: per_class ...) under ``work``."""
    (one,) = demo_tiles(work, ("31UFT",), (2018,))
    table = one.dir / "samples.parquet"
    sampling.run(one.cube, one.valid, one.labels, table, tile="31UFT", year=2018, **draw)
    return one.cube, table
