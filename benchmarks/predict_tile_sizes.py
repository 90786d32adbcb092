"""lcflow predict on cubes of growing size: wall time, pixels per second and peak memory per model.

A whole Sentinel-2 tile is 10980 x 10980 px; with 12 monthly composites of 10 bands its cube holds
120 int16 bands (29 GB uncompressed). Prediction reads it window by window, so peak memory must depend
on the window, not on the cube: this benchmark predicts cubes of several sizes (the 256 px demo cube
tiled to each size, written as the cube stage writes it) with each model, each prediction in its own
process, and prints peak RSS and throughput per size and model (in all, and of the window loop the log
reports), and the whole-tile time implied by the window loop's rate at the largest measured size.
``--sizes 10980`` measures a whole tile (on 2 CPU cores about 4-5 h for the LSTM).

The forest maps twice, from the same trained trees: ``rf`` through lcflow's compiled traversal (its
default ``predict_engine``) and ``rf-sklearn`` through scikit-learn's ``predict_proba``; the summary gives
the ratio of their window-loop rates at each size and whether the two maps are identical.
"""

import argparse
import json
import os
import re
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from shared import BANDS, demo_cube, forest_map_rate, raster_digest, run_cpu_s, tiled_cube

from lcflow.common.raster import read_tag
from lcflow.train import training

TILE_PX = 10980
#: model -> training settings: the workflow's defaults, the LSTM trained briefly (its speed of
#: prediction does not depend on how long it was trained)
MODELS = {"rf": {}, "lstm": {"epochs": 1, "min_steps": 50}}
#: the same trained model predicting with other parameters: name -> (trained model, parameters changed)
VARIANTS = {"rf-sklearn": ("rf", {"predict_engine": "scikit-learn"})}


def child(model_dir: str, cube_path: str, out: str) -> None:
    """Predict in this process; print its own peak RSS (ru_maxrss of the process, not of its siblings)."""
    import logging

    from lcflow.maps import predict

    logging.basicConfig(level=logging.INFO, format="    %(message)s")
    predict.run(model_dir, cube_path, out, out.replace(".tif", "_confidence.tif"), block=256)
    print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def measure(model_dir: Path, cube_path: Path, out: Path) -> dict:
    """One prediction in its own process: wall and CPU seconds (the process and its threads), the window
    loop's rate from its log, its peak RSS."""
    start = time.perf_counter()
    done, cpu_s = run_cpu_s([sys.executable, __file__, "--child", str(model_dir), str(cube_path), str(out)],
                            capture_output=True, text=True)
    wall = time.perf_counter() - start
    last = [line for line in done.stderr.splitlines() if " windows, " in line][-1]
    loop_px_s = float(re.search(r"windows, (\d+) px/s", last).group(1))
    return {"wall_s": wall, "cpu_s": cpu_s, "loop_px_s": loop_px_s, **json.loads(done.stdout.strip().splitlines()[-1])}


def prepare(work: Path, names: list[str]) -> tuple[dict[str, Path], Path]:
    """Demo scenes -> 256 px cube -> samples -> one model of each kind asked for, and its variants (a copy
    of the model directory whose model.json holds the changed parameters)."""
    small, samples = demo_cube(work)
    models = {}
    for name in names:
        trained, changed = VARIANTS.get(name, (name, {}))
        if trained not in models:
            training.train(trained, [str(samples)], work / trained, MODELS[trained])
            models[trained] = work / trained
        if name != trained:
            shutil.copytree(work / trained, work / name)
            meta = json.loads((work / name / "model.json").read_text())
            meta["params"].update(changed)
            (work / name / "model.json").write_text(json.dumps(meta))
            models[name] = work / name
    return models, small


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="1024,2048", help="cube sides in px, comma-separated")
    ap.add_argument("--models", default="rf,rf-sklearn,lstm", help=f"of {', '.join([*MODELS, *VARIANTS])}")
    ap.add_argument("--work", default=None, help="folder for the cubes (a whole-tile cube needs ~20 GB)")
    ap.add_argument("--json", type=Path, help="also write every prediction's figures to this file (seed_study.py's "
                    "--map-figures)")
    ap.add_argument("--child", nargs=3, metavar=("MODEL", "CUBE", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    names = args.models.split(",")
    rows = []
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        work = Path(tmp)
        models, small = prepare(work, names)
        print(f"cube: {len(read_tag(small, 'time_steps'))} time steps x {len(BANDS)} bands = "
              f"{len(read_tag(small, 'time_steps')) * len(BANDS)} int16 bands; windows of 256 px", flush=True)
        for size in sizes:
            big = work / f"cube_{size}.tif"
            start = time.perf_counter()
            tiled_cube(small, size, big)
            print(f"{size} x {size} px cube written in {time.perf_counter() - start:.0f} s "
                  f"({big.stat().st_size / 2**30:.1f} GiB on disk)", flush=True)
            for name in names:
                r = measure(models[name], big, work / f"map_{name}_{size}.tif")
                r.update(model=name, size=size, px_s=size * size / r["wall_s"],
                         digest=raster_digest([work / f"map_{name}_{size}.tif"]), cores=len(os.sched_getaffinity(0)),
                         forest_px_s=forest_map_rate(models[name], small))
                rows.append(r)
                forest = f", its forest alone {r['forest_px_s']:6.0f} px/s" if r["forest_px_s"] else ""
                print(f"  {name:5s} {r['wall_s']:8.1f} s in all ({r['px_s']:6.0f} px/s, {r['cpu_s']:.0f} CPU s), window "
                      f"loop {r['loop_px_s']:6.0f} px/s, peak RSS {r['peak_rss_mb']:6.0f} MB{forest}", flush=True)
                (work / f"map_{name}_{size}.tif").unlink()
                (work / f"map_{name}_{size}_confidence.tif").unlink()
            big.unlink()
    if args.json:
        args.json.write_text(json.dumps({"predictions": rows}, indent=1))
    print("\nsummary (one process per prediction, same machine, same run)")
    for name in names:
        mine = [r for r in rows if r["model"] == name]
        rss = [r["peak_rss_mb"] for r in mine]
        largest = max(mine, key=lambda r: r["size"])
        print(f"  {name:5s} peak RSS {min(rss):.0f}-{max(rss):.0f} MB over sides {', '.join(str(r['size']) for r in mine)}"
              f" px (ratio largest/smallest cube {max(rss) / min(rss):.2f} for "
              f"{largest['size'] ** 2 / min(r['size'] for r in mine) ** 2:.0f}x the pixels);"
              f" a whole {TILE_PX} px tile at the window loop's {largest['loop_px_s']:.0f} px/s:"
              f" {TILE_PX ** 2 / largest['loop_px_s'] / 3600:.1f} h plus start-up and COG writing")
        for variant, (trained, _) in VARIANTS.items():
            if name != variant or trained not in names:
                continue
            for r in mine:
                base = next(b for b in rows if b["model"] == trained and b["size"] == r["size"])
                print(f"    {trained} / {variant} at {r['size']} px: window loop {base['loop_px_s'] / r['loop_px_s']:.2f}x,"
                      f" in all {r['wall_s'] / base['wall_s']:.2f}x; maps "
                      + ("identical" if base["digest"] == r["digest"] else "DIFFERENT"))
        if max(rss) > 4096:
            sys.exit(f"{name}: peak RSS {max(rss):.0f} MB is over 4 GiB")


if __name__ == "__main__":
    main()
