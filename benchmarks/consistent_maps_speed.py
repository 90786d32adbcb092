"""What ``lcflow consistent-maps`` (the ``consistent_maps`` rule) costs on one core, against reading the same
probability rasters alone, on grids of growing side; the whole-tile (10980 px) minutes a job this implies.

The input is a series of years of class probabilities stored as ``lcflow predict --probabilities``
stores them (its staging GeoTIFF: uint8, a band a class, 256 px tiles, band-interleaved, ZSTD): fields of
8-40 px whose class stays from year to year except in a few fields a year (``--changed``), the class's
probability drawn around ``--peak`` and the rest spread over the other classes at random, and a speckle
of pixels whose classes are drawn anew each year
(the noise a consistent series removes). Each side runs ``consistent.run`` at the schema's defaults
(evidence ratio, minimum change patch, window) in a process of its own pinned to one core; the read alone reads
every year's window with the same halo. Prints CPU seconds of each, their ratio and where the time of the
consistent maps went (cProfile's top functions at the largest side, with ``--profile``). With ``--against
REV`` the lcflow of that git revision runs too, in turns, on the same rasters, and the two versions'
outputs are compared pixel for pixel: the speed-up is a ratio of one run. With ``--cold`` each side's first
turn compiles the numba kernels afresh (an empty ``NUMBA_CACHE_DIR``), as the first jobs of a fresh install
do; its CPU seconds beyond the median of the warm turns are the compile's (``compile_cpu_s`` in ``--json``).

    python benchmarks/consistent_maps_speed.py [--sides 1024,2048] [--years 3] [--classes 13] [--against HEAD~1]
    python benchmarks/consistent_maps_speed.py --sides 256 --rounds 3 --cold --json FILE
"""

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio
from rasterio.crs import CRS
from rasterio.transform import from_origin

from lcflow.common.raster import Grid, read_with_halo, staging_profile
from lcflow.defaults import default
from lcflow.maps import consistent, predict

ROOT = Path(__file__).resolve().parents[1]
TILE = 10980


def fields(side: int, classes: int, rng: np.random.Generator) -> np.ndarray:
    """A class index a pixel: rectangles of 8-40 px, as parcels look at 10 m."""
    out = np.empty((side, side), np.int16)
    row = 0
    while row < side:
        h = int(rng.integers(8, 41))
        col = 0
        while col < side:
            w = int(rng.integers(8, 41))
            out[row:row + h, col:col + w] = rng.integers(0, classes)
            col += w
        row += h
    return out


def series(folder: Path, side: int, years: list[int], classes: list[int], changed: float, peak: float,
           speckle: float, seed: int = 0) -> list[Path]:
    """Probability rasters of ``years`` on one grid; see the module's docstring."""
    rng = np.random.default_rng(seed)
    k = len(classes)
    truth = fields(side, k, rng)
    paths = []
    for year in years:
        if paths:  # some fields change class
            again = fields(side, k, rng)
            move = fields(side, 1000, rng) < changed * 1000
            truth = np.where(move, again, truth)
        path = folder / f"proba_{side}_{year}.tif"
        grid = Grid(CRS.from_epsg(32631), from_origin(600000, 5800000, 10, 10), side, side)
        with rasterio.open(path, "w", **staging_profile(grid, k, "uint8", predict.PROBABILITY_NODATA)) as dst:
            dst.update_tags(model="rf", class_codes=json.dumps(classes),
                            class_names=json.dumps({str(c): f"class {c}" for c in classes}))
            for row in range(0, side, 1024):
                h = min(1024, side - row)
                cls = truth[row:row + h].astype(np.int64)
                noisy = rng.random((h, side)) < speckle
                cls = np.where(noisy, rng.integers(0, k, (h, side)), cls)
                rest = rng.gamma(0.5, size=(k, h, side)).astype(np.float32)
                np.put_along_axis(rest, cls[None], 0.0, axis=0)
                own = np.clip(rng.normal(peak, 0.15, (h, side)), 0.2, 0.99).astype(np.float32)
                proba = rest / rest.sum(axis=0) * (1 - own)
                np.put_along_axis(proba, cls[None], own[None], axis=0)
                stored = np.round(proba * predict.PROBABILITY_SCALE).astype(np.uint8)
                dst.write(stored, window=rasterio.windows.Window(0, row, side, h))
        paths.append(path)
    return paths


def read_alone(paths: list[Path], block: int, halo: int) -> None:
    grid = Grid.of(paths[0])
    sources = [rasterio.open(p) for p in paths]
    try:
        for win in grid.windows(block):
            for src in sources:
                read_with_halo(src, win, halo, predict.PROBABILITY_NODATA)
    finally:
        for src in sources:
            src.close()


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def one_core() -> None:
    """Pin this process to the first core it may run on."""
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})


def child(paths: list[str], years: list[int], out: str, profile: bool) -> None:
    """consistent.run on one core in this process (the lcflow on PYTHONPATH); prints its CPU seconds."""
    one_core()
    out = Path(out)
    outputs = {"maps": [out / f"map_{y}.tif" for y in years], "confidences": [out / f"conf_{y}.tif" for y in years],
               "changes": [out / f"change_{a}_{b}.tif" for a, b in zip(years, years[1:])]}
    profiler = cProfile.Profile() if profile else None
    started, wall = cpu(), time.perf_counter()
    if profiler:
        profiler.enable()
    if hasattr(consistent, "SeriesOutputs"):
        series_out = consistent.SeriesOutputs.of(outputs["maps"], outputs["confidences"], outputs["changes"],
                                                 out / "summary.json")
        summary = consistent.run(paths, years, series_out, block=default("predict.block_px"))
    else:  # an lcflow from before SeriesOutputs (--against)
        summary = consistent.run(paths, years, summary=out / "summary.json", block=default("predict.block_px"),
                                 **outputs)
    if profiler:
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(12)
    pair = summary["pairs"][0]
    print(json.dumps({"cpu_s": cpu() - started, "wall_s": time.perf_counter() - wall,
                      "raw": pair["raw"]["agreement"], "consistent": pair["consistent"]["agreement"]}))


def measure(workflow: Path, paths: list[Path], years: list[int], out: Path, profile: bool,
            numba_cache: Path | None = None) -> dict:
    """One child process, lcflow from ``workflow`` (its numba kernels cached in ``numba_cache`` where given,
    else where numba keeps them); the digest of its output rasters' pixels, taken here (the child imports
    nothing of this checkout's but this file, so that an older lcflow runs it)."""
    from shared import raster_digest

    out.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(workflow), **({"NUMBA_CACHE_DIR": str(numba_cache)} if numba_cache else {})}
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps([str(p) for p in paths]),
                           json.dumps(years), str(out), *(["--profile"] if profile else [])],
                          check=True, capture_output=True, text=True, env=env)
    if profile:
        print(done.stderr, file=sys.stderr)
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "digest": raster_digest(sorted(out.glob("*.tif")))}


def differing(a: Path, b: Path) -> str:
    """How many pixels of each kind of output raster (maps, confidences, changes) differ between two runs."""
    counts = {}
    for path in sorted(a.glob("*.tif")):
        with rasterio.open(path) as x, rasterio.open(b / path.name) as y:
            kind = path.stem.split("_")[0]
            differ, total = counts.get(kind, (0, 0))
            counts[kind] = (differ + int((x.read() != y.read()).sum()), total + x.width * x.height)
    return ", ".join(f"{kind} {d:,} of {t:,} px ({d / t:.1e})" for kind, (d, t) in counts.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sides", default="1024,2048", help="grid sides in px, comma-separated")
    ap.add_argument("--years", type=int, default=3, help="years in the series (the seed study's 3)")
    ap.add_argument("--classes", type=int, default=13, help="classes (CLC level 2 in a Dutch tile: 13)")
    ap.add_argument("--changed", type=float, default=0.03, help="share of fields whose class changes a year")
    ap.add_argument("--peak", type=float, default=0.7, help="mean probability of a pixel's own class")
    ap.add_argument("--speckle", type=float, default=0.05, help="share of pixels of a year whose class is drawn anew")
    ap.add_argument("--against", help="a git revision of lcflow to run side by side, in turns (its outputs compared)")
    ap.add_argument("--rounds", type=int, default=2, help="turns of each version a side (the median is printed)")
    ap.add_argument("--profile", action="store_true", help="print cProfile's top functions at the largest side")
    ap.add_argument("--cold", action="store_true", help="each side's first turn compiles the kernels afresh (an "
                    "empty NUMBA_CACHE_DIR); the compile's CPU is that turn's beyond the warm turns' median")
    ap.add_argument("--json", type=Path, help="also write each side's figures (this lcflow's) to this file "
                    "(seed_study.py's --consistent-figures)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cold and args.rounds < 2:
        ap.error("--cold needs --rounds 2 or more: warm turns to compare the cold one with")
    if args.child:
        return child(json.loads(args.child[0]), json.loads(args.child[1]), args.child[2], args.profile)
    years = list(range(2018, 2018 + args.years))
    classes = list(range(11, 11 + args.classes))
    block = default("predict.block_px")
    halo = consistent.change_patch_px(default("consistency.min_change_ha"), 10.0 * 10.0, args.years)[1]
    sides = [int(s) for s in args.sides.split(",")]
    print(f"# one core; {args.years} years, {args.classes} classes, windows of {block} px, halo {halo} px, "
          f"{args.changed:.0%} of fields changed a year, {args.speckle:.0%} speckle; CPU s are medians of "
          f"{args.rounds - args.cold} {'warm ' if args.cold else ''}turns")
    from shared import (
        lcflow_versions,  # here, not at the top: the child imports nothing of this checkout's
    )

    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        with lcflow_versions(args.against, tmp / "against") as versions:
            for side in sides:
                paths = series(tmp, side, years, classes, args.changed, args.peak, args.speckle)
                one_core()
                started = cpu()
                read_alone(paths, block, halo)
                read_s = cpu() - started
                runs = {name: [] for name in versions}
                for turn in range(args.rounds):
                    for name, workflow in versions.items():
                        profile = args.profile and side == sides[-1] and turn == 0 and name == "this"
                        # --cold: a cache of this side's own, empty at the first turn, that the later turns find full
                        cold = tmp / f"numba_{side}_{name}" if args.cold else None
                        runs[name].append(measure(workflow, paths, years, tmp / f"{side}_{name}_{turn}", profile, cold))
                px = side * side
                warm = {name: got[1:] if args.cold else got for name, got in runs.items()}
                medians = {name: float(np.median([r["cpu_s"] for r in got])) for name, got in warm.items()}
                compile_s = runs["this"][0]["cpu_s"] - medians["this"] if args.cold else None
                if args.cold:
                    print(f"{side:>6} px: the first turn, kernels compiled afresh, {runs['this'][0]['cpu_s']:.1f} CPU s: "
                          f"{compile_s:.1f} s of compiling", flush=True)
                for name, got in runs.items():
                    spent = medians[name]
                    print(f"{side:>6} px {name:>10}: {spent:7.1f} CPU s ({read_s / spent:.2f} of it reading alone: "
                          f"{read_s:.1f} s), {px / spent:10,.0f} px/s, a whole tile {TILE * TILE / (px / spent) / 60:5.1f} "
                          f"min; {years[0]}-{years[1]} raw maps agree {got[0]['raw']:.3f}, consistent "
                          f"{got[0]['consistent']:.3f}", flush=True)
                figures.append({"side": side, "years": args.years, "classes": args.classes, "cores": 1,
                                "cpu_s": medians["this"], "cpu_s_each": [r["cpu_s"] for r in runs["this"]],
                                "read_cpu_s": read_s, **({"compile_cpu_s": compile_s} if args.cold else {})})
                if args.against:
                    same = {r["digest"] for rs in runs.values() for r in rs}
                    where = "" if len(same) == 1 else ": " + differing(tmp / f"{side}_this_0", tmp / f"{side}_{args.against}_0")
                    print(f"{side:>6} px: this {medians[args.against] / medians['this']:.2f}x as fast as {args.against}; outputs "
                          f"{'identical' if len(same) == 1 else 'DIFFERENT'}{where}", flush=True)
            if args.json:
                args.json.write_text(json.dumps({"sides": figures}, indent=1))


if __name__ == "__main__":
    main()
