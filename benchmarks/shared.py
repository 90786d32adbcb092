"""What the benchmarks share: the demo's tile-years as the workflow makes them (demo scenes -> STAC search
-> cube -> CORINE level-2 labels) and as labelled pixels, a small cube repeated to a large one, row draws,
balanced accuracy, a forest's map rate and the process's peak memory. One place for the demo's tiles,
years and bands."""

import contextlib
import hashlib
import json
import resource
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import rasterio

from lcflow.common.raster import Bands, Grid, staged_cog
from lcflow.labels import alignment as labels
from lcflow.labels import nomenclature, sampling
from lcflow.labels.sample_settings import SampleSettings
from lcflow.retrieve import cube, search
from lcflow.retrieve.composite import NODATA
from lcflow.retrieve.cube_settings import CubeSettings
from lcflow.synth.demo import make_demo
from lcflow.train.data.training_data import spatial_blocks

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
                cube.run(d / "items.json", tile, year, d / "cube.tif", d / "valid.tif", CubeSettings(bands=BANDS),
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
    settings = SampleSettings(**{"min_per_class": 0, "clean": {"min_label_probability": 0}, **draw})
    sampling.run(one.cube, one.valid, one.labels, table, settings, tile="31UFT", year=2018)
    return one.cube, table


def tiled_cube(small: Path, size: int, out: Path) -> None:
    """The small cube repeated to ``size`` x ``size`` px, written window by window as the cube stage does
    (tiled 256 px, ZSTD, band-interleaved), so that only one window is ever in memory."""
    with rasterio.open(small) as src:
        data, names, raw_tags = src.read(), list(src.descriptions), src.tags()
    g = Grid.of(small)
    tags = {k: json.loads(v) if k in ("bands", "time_steps", "invalid_scl") else v
            for k, v in raw_tags.items() if k != "AREA_OR_POINT"}
    grid = Grid(g.crs, g.transform, size, size)
    n = data.shape[1]
    with staged_cog(out, grid, Bands(data.shape[0], "int16", NODATA, names), tags=tags) as staged:
        for win in grid.windows(1024):
            rows = (np.arange(win.row_off, win.row_off + win.height) % n)[:, None]
            cols = (np.arange(win.col_off, win.col_off + win.width) % n)[None, :]
            staged.dataset.write(data[:, rows, cols], window=win)
        stage = staged.finish(cog=False)
        stage.rename(out)


def demo_pixels(work: Path, years: tuple[int, ...], side: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Series (pixels, steps, bands) with NaN gaps, CORINE level-2 labels, true classes, the test-block
    flag (the left quarter) and the spatial block (training's, each tile-year apart) of every labelled
    pixel of the demo's tile-years."""
    level2 = nomenclature.clc_level(2)
    xs, ys, truths, tests, places = [], [], [], [], []
    for k, one in enumerate(demo_tiles(work, years=years, side=side)):
        with rasterio.open(one.labels) as src:
            label = src.read(1).ravel()
            width, nodata = src.width, src.nodata
        values = cube_series(one.cube)
        with rasterio.open(one.truth) as src:
            truth = level2.apply(src.read(1).ravel())
        keep = (label > 0) & (label != nodata)  # no CORINE class there
        xs.append(values[keep])
        ys.append(label[keep])
        truths.append(truth[keep])
        tests.append((np.arange(label.size) % width < width // 4)[keep])
        row, col = np.divmod(np.arange(label.size), width)
        places.append(pd.DataFrame({"tile": k, "row": row[keep], "col": col[keep]}))
    blocks = spatial_blocks(pd.concat(places, ignore_index=True))[0]
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(truths), np.concatenate(tests), blocks


def draw(pool: np.ndarray, label: np.ndarray, n: int, per_class: bool) -> np.ndarray:
    """``n`` rows of ``pool`` (shuffled already): its first ``n``, or with ``per_class`` up to n / classes of
    each class and the rest from what is left, in the pool's order."""
    if not per_class:
        return pool[:n]
    classes = np.unique(label[pool])
    share = n // len(classes)
    taken = np.concatenate([pool[label[pool] == c][:share] for c in classes])
    return np.concatenate([taken, pool[~np.isin(pool, taken)][:n - len(taken)]])


def balanced(codes: np.ndarray, true: np.ndarray) -> float:
    """The mean of the classes' recalls (the classes present in ``true``)."""
    return float(np.mean([(codes[true == c] == c).mean() for c in np.unique(true)]))


def map_rate(model, x: np.ndarray, repeats: int = 3) -> float:
    """Pixels a second of ``model``'s compiled probabilities on ``x`` (already prepared): the median of
    ``repeats`` timings, after one run that compiles the forest."""
    model.predict_proba(x[:4096])
    spent = []
    for _ in range(repeats):
        started = time.perf_counter()
        model.predict_proba(x)
        spent.append(time.perf_counter() - started)
    return len(x) / float(np.median(spent))


def seconds_in_turns(runs: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Wall seconds of each of ``runs``, called in turns ``rounds`` times: a ratio of two of them is
    measured under the same load."""
    spent: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            spent[name].append(time.perf_counter() - started)
    return spent


def forest_map_rate(model_dir: Path, cube_path: Path) -> float | None:
    """The compiled map rate here (px/s, every core) of the forest in ``model_dir`` on every pixel of
    ``cube_path``, prepared beforehand (``map_rate``); None for a model that is not a forest."""
    from lcflow.common.features import prepare
    from lcflow.train.model_dirs.model_dir import TrainedModel

    trained = TrainedModel.load(model_dir)
    if not hasattr(trained.model, "compiled"):
        return None
    return map_rate(trained.model, prepare(cube_series(cube_path), trained.standardise)[0])


@contextlib.contextmanager
def lcflow_versions(against: str | None, where: Path) -> Iterator[dict[str, Path]]:
    """The lcflow packages a benchmark runs side by side, name -> ``workflow`` folder: this checkout's as
    ``this`` and, with ``against``, that git revision's, checked out at ``where`` (a git worktree) for the
    block and removed after it."""
    root = Path(__file__).resolve().parents[1]
    versions = {"this": root / "workflow"}
    if against:
        subprocess.run(["git", "-C", str(root), "worktree", "add", "--detach", str(where), against], check=True,
                       capture_output=True)
        versions[against] = where / "workflow"
    try:
        yield versions
    finally:
        if against:
            subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(where)], capture_output=True)


def run_cpu_s(command: list[str], **kwargs) -> tuple[subprocess.CompletedProcess, float]:
    """``subprocess.run(command, check=True, **kwargs)`` and the CPU seconds (user + system) the process
    and its threads spent."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, check=True, **kwargs)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def raster_digest(paths: list[Path]) -> str:
    """One digest of the pixels of rasters, block by block (not of the files, whose metadata hold times)."""
    digest = hashlib.sha256()
    for path in paths:
        with rasterio.open(path) as src:
            for _, window in src.block_windows(1):
                digest.update(src.read(window=window).tobytes())
    return digest.hexdigest()


def peak_mb() -> float:
    """The process's peak resident memory so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
