"""The seed study (config/netherlands.yaml: 10 whole tiles x 2018-2020, rf and lstm) end to end on a stated
cluster, projected from per-stage rates measured in this run.

Each stage's rate comes from the demo's own jobs, run here (``snakemake --profile profiles/local`` in a
scratch directory, or ``--demo-results`` of a finished ``make demo``): the CPU seconds Snakemake's
``benchmark:`` measured per job, less the start-up of an ``lcflow`` process (measured here too), per
unit of that stage's work (pixels x scenes for a cube, samples for sampling and training, pixels for a
map). GPU stages take the figures ``benchmarks/gpu.py`` measured on a GPU (``--gpu-figures``; the
repository holds an H100's), else this machine's CPU rate. A forest's map cost grows with the forest, and
the demo's forest learns from a few thousand rows: the forest's part of a map job (the demo forest's
compiled rate, measured here) is replaced by that of a forest of the seed study's rows and leaf size
(``--forest-figures``, written by ``forest_size.py --json``), whose fit is also the forest's training.
A demo job covers 65,536 px, so its fixed costs (imports, loading a model, writing COGs) count as
per-pixel work and swing with the machine's load: where larger jobs were measured, they are taken instead
and the demo's rate printed beside them as a cross-check: the cube from a whole tile's
(``--cube-figures``, ``cube_whole_tile.py --json``), the labels from whole-tile jobs (``--labels-figures``,
``labels_vs_gdalwarp.py --json``), the rest of a forest map job (reading, preparing, writing) from a
whole-tile job (``--map-figures``, ``predict_tile_sizes.py --json``), the
consistent maps from a whole-tile series on one core (``--consistent-figures``,
``consistent_maps_speed.py --json``, with the spread of its turns). Network reads, scene counts and sizes,
classes present, and scaling across cores and nodes are assumptions, printed as such. Each stage's wall
time is its jobs in waves as the cluster holds them, with the cores the Slurm profile gives a job
(``CPU_CORES`` for the cube and the forest's maps, a whole node for the forest's training). The total
is the critical path: the stages in turn, but the forest's training and maps beside the deep model's on
the GPU nodes, as Snakemake runs them; the sum of every stage is printed beside it as an upper bound.
Prints every input and the projection per stage.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import rasterio
import yaml
from shared import forest_map_rate, run_cpu_s

ROOT = Path(__file__).resolve().parents[1]
TILE_PX = 10980 * 10980


def cpu_seconds(results: Path, stage: str) -> list[float]:
    """CPU seconds of every job of a stage, from its benchmark files."""
    return [float(pd.read_csv(p, sep="\t", na_values=["NA"]).iloc[-1]["cpu_time"])
            for p in sorted((results / "benchmarks" / stage).glob("*.tsv")) if not p.stem.endswith("_summary")]


def startup_cpu() -> float:
    """CPU seconds of an lcflow process that does nothing (imports, argument parsing): the part of a demo
    job that does not grow with the work. Median of 3."""
    bin_dir = Path(sys.executable).parent
    spent = []
    for _ in range(3):
        spent.append(run_cpu_s([str(bin_dir / "lcflow"), "check-config", "--configfile",
                                str(ROOT / "config" / "config.yaml")], capture_output=True)[1])
    return float(np.median(spent))


def px(path: Path) -> int:
    with rasterio.open(path) as ds:
        return ds.width * ds.height


def measured_rates(results: Path, demo: dict, overhead: float) -> dict[str, dict]:
    """Per-stage CPU seconds per unit of work on this machine, from the demo run under ``results``."""
    tiles, years = demo["tiles"], demo["years"]
    tile_years = [(t, y) for t in tiles for y in years]
    cube_px = {ty: px(results / ty[0] / str(ty[1]) / "cube.tif") for ty in tile_years}
    scenes = {ty: len(json.loads((results / ty[0] / str(ty[1]) / "items.json").read_text())["features"])
              for ty in tile_years}
    samples = {ty: pq.read_metadata(results / ty[0] / str(ty[1]) / "samples.parquet").num_rows for ty in tile_years}
    rf = json.loads((results / "models" / "rf" / "metrics.json").read_text())
    lstm = json.loads((results / "models" / "lstm" / "metrics.json").read_text())

    def rate(stage: str, units: float, jobs: int | None = None) -> dict:
        cpu = cpu_seconds(results, stage)
        jobs = jobs or len(cpu)
        net = max(sum(cpu) - overhead * jobs, 0.1 * sum(cpu))
        return {"cpu_s_per_unit": net / units, "jobs": jobs, "cpu_s": sum(cpu)}

    n_maps = len(tile_years)
    rates = {
        "cube": {**rate("cube", sum(cube_px[ty] * scenes[ty] for ty in tile_years)), "unit": "px x scene"},
        "labels": {**rate("labels", sum(cube_px[(t, years[0])] for t in tiles)), "unit": "px"},
        "sample": {**rate("sample", sum(samples.values())), "unit": "sample"},
        "train_rf": {"unit": "sample x log2(samples) x tree", "jobs": 1},
        "predict_rf": {"unit": "px"}, "predict_lstm": {"unit": "px"},
        "consistent_maps": {**rate("consistent_maps", sum(cube_px.values()) * 3), "unit": "px x year x model"},
        "assess": {**rate("assess", n_maps * 3), "unit": "map"},
    }
    # training: the forest's share of the train stage is its own benchmark file
    rf_cpu = float(pd.read_csv(results / "benchmarks" / "train" / "rf.tsv", sep="\t").iloc[-1]["cpu_time"])
    rates["train_rf"]["cpu_s_per_unit"] = max(rf_cpu - overhead, 0.1 * rf_cpu) / (
        rf["n_train"] * math.log2(rf["n_train"]) * rf["params"]["n_estimators"])
    for model in ("rf", "lstm"):
        cpu = [float(pd.read_csv(p, sep="\t").iloc[-1]["cpu_time"])
               for p in (results / "benchmarks" / "predict").glob(f"*_{model}.tsv")]
        rates[f"predict_{model}"]["cpu_s_per_unit"] = max(sum(cpu) - overhead * len(cpu), 0.1 * sum(cpu)) / sum(cube_px.values())
        rates[f"predict_{model}"]["jobs"] = len(cpu)
    rates["train_lstm_cpu"] = {"samples_per_s": lstm["samples_per_s"], "ranks": lstm["world_size"],
                               "unit": "sample (steady, all ranks)"}
    rates["demo"] = {"scenes_per_tile_year": float(np.mean(list(scenes.values()))),
                     "samples_per_class": demo["sample"]["per_class"],
                     "classes": len(rf.get("test", {}).get("per_class", {})) or None}
    return rates


def run_demo(work: Path) -> Path:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    started = time.perf_counter()
    subprocess.run(["snakemake", "--profile", str(ROOT / "profiles" / "local"), "-s", str(ROOT / "Snakefile"),
                    "-d", str(work), "--configfile", str(ROOT / "config" / "config.yaml")], check=True, env=env,
                   capture_output=True)
    print(f"demo run here in {time.perf_counter() - started:.0f} s", flush=True)
    return work / "results"


def gpu_rates(path: Path | None, batch: int, block: int) -> dict | None:
    """The GPU figures nearest the seed study's settings: training at its per-rank batch, prediction at
    its window size with lcflow's choice of preparing threads; of the latest session (``date``; none: the
    first) that measured the LSTM, where the file holds several."""
    if path is None or not path.exists():
        return None
    fig = json.loads(path.read_text())

    def latest(rows: list[dict]) -> list[dict]:
        last = max(r.get("date", "") for r in rows)
        return [r for r in rows if r.get("date", "") == last]

    train = latest([r for r in fig["train"] if r["model"] == "lstm" and r.get("precision", "fp32") == "fp32"
                    and "ranks" not in r])
    at = min(train, key=lambda r: abs(r["batch"] - batch))
    pred = latest([r for r in fig["predict"] if r["model"] == "lstm"])
    at_block = min(pred, key=lambda r: abs(r["block"] - block))["block"]
    runs = [r for r in pred if r["block"] == at_block]
    best = max(runs, key=lambda r: (r.get("threads", 1), r["loop_px_s"]))
    return {"device": fig["device"], "train_samples_per_s": at["samples_per_s"], "train_batch": at["batch"],
            "predict_px_s": best["loop_px_s"], "predict_block": best["block"], "predict_threads": best.get("threads")}


def forest_figures(path: Path | None, rows: int, leaf: int) -> dict | None:
    """The forest_size.py fit (``--json``) nearest the seed study's forest: its training rows (on a log
    scale) and min_samples_leaf; its map rate as for 300 trees."""
    if path is None or not path.exists():
        return None
    fits = json.loads(path.read_text())["fits"]
    fits = [f for f in fits if f["leaf"] == leaf] or fits
    fit = min(fits, key=lambda f: abs(math.log(f["rows"] / rows)))
    return {**fit, "px_s": fit["map_px_s_300_trees"], "nodes_300": fit["nodes"] * 300 / fit["trees"],
            "file": path.name}


def whole_tile_map(path: Path | None) -> dict | None:
    """The largest forest map job of ``predict_tile_sizes.py --json`` (a whole tile where it measured one):
    its CPU seconds a pixel less its forest's (the forest's rate alone, on every core, measured in the
    same run), i.e. reading, preparing and writing a window, which do not grow with the forest."""
    if path is None or not path.exists():
        return None
    runs = [r for r in json.loads(path.read_text())["predictions"] if r.get("forest_px_s")]
    if not runs:
        return None
    job = max(runs, key=lambda r: r["size"])
    px = job["size"] ** 2
    rest = job["cpu_s"] / px - job["cores"] / job["forest_px_s"]
    return {**job, "rest_cpu_s_per_px": max(rest, 0.0), "file": path.name}


def cube_figures(path: Path | None) -> dict | None:
    """The cube of ``cube_whole_tile.py --json`` from local disk with the most reading threads: its CPU
    seconds a pixel and scene (scaled to other scene counts as if linear: the composites and the output
    bands do not grow with the scenes, so an upper bound), and its overhead over the plain read's CPU."""
    if path is None or not path.exists():
        return None
    fig = json.loads(path.read_text())
    runs = [r for r in fig["runs"] if r["source"] == "local disk"] or fig["runs"]
    run = max(runs, key=lambda r: r["threads"])
    return {**fig, "cpu_s": run["cube"]["cpu_s"], "plain_cpu_s": run["plain"]["cpu_s"],
            "cpu_s_per_px_scene": run["cube"]["cpu_s"] / fig["size"] ** 2 / fig["dates"], "file": path.name}


def labels_figures(path: Path | None) -> dict | None:
    """The whole-tile ``lcflow labels`` jobs of ``labels_vs_gdalwarp.py --json``: CPU seconds a pixel."""
    if path is None or not path.exists():
        return None
    fig = json.loads(path.read_text())
    return {**fig, "cpu_s_per_px": fig["cpu_s"] / fig["px"], "file": path.name}


def consistent_figures(path: Path | None) -> dict | None:
    """The largest side of ``consistent_maps_speed.py --json``: one core's CPU seconds a pixel of a
    series of its years, and the spread of its turns."""
    if path is None or not path.exists():
        return None
    side = max(json.loads(path.read_text())["sides"], key=lambda f: f["side"])
    px = side["side"] ** 2
    return {**side, "cpu_s_per_px_year": side["cpu_s"] / px / side["years"],
            "spread": (min(side["cpu_s_each"]) / px / side["years"], max(side["cpu_s_each"]) / px / side["years"]),
            "file": path.name}


def demo_forest_px_s(results: Path, demo: dict) -> tuple[float, int]:
    """The compiled map rate here of the demo run's forest, on every pixel of its first tile-year's cube,
    prepared beforehand, timed as forest_size.py times a forest; and the cores it ran on."""
    cube = results / demo["tiles"][0] / str(demo["years"][0]) / "cube.tif"
    return forest_map_rate(results / "models" / "rf", cube), len(os.sched_getaffinity(0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demo-results", type=Path, help="results/ of a finished make demo (default: run it here)")
    ap.add_argument("--gpu-figures", type=Path, default=ROOT / "benchmarks" / "measured" / "gpu_h100.json")
    ap.add_argument("--forest-figures", type=Path, default=ROOT / "benchmarks" / "measured" / "forest_size_seed_sqrt_2core.json",
                    help="forest_size.py --json of a forest of the seed study's size, for the forest's map rate")
    ap.add_argument("--map-figures", type=Path,
                    default=ROOT / "benchmarks" / "measured" / "predict_whole_tile_rf_2core.json",
                    help="predict_tile_sizes.py --json of a whole-tile forest map job: the rest of a forest map job")
    ap.add_argument("--cube-figures", type=Path, default=ROOT / "benchmarks" / "measured" / "cube_whole_tile_2core.json",
                    help="cube_whole_tile.py --json: a whole tile's cube")
    ap.add_argument("--labels-figures", type=Path,
                    default=ROOT / "benchmarks" / "measured" / "labels_whole_tile_2core.json",
                    help="labels_vs_gdalwarp.py --json: whole-tile lcflow labels jobs")
    ap.add_argument("--consistent-figures", type=Path,
                    default=ROOT / "benchmarks" / "measured" / "consistent_maps_whole_tile_1core.json",
                    help="consistent_maps_speed.py --json: consistent maps of a whole tile (or a large grid) on "
                    "one core")
    ap.add_argument("--config", type=Path, default=ROOT / "config" / "netherlands.yaml")
    g = ap.add_argument_group("the cluster (stated)")
    g.add_argument("--cpu-nodes", type=int, default=8)
    g.add_argument("--gpu-nodes", type=int, default=4)
    g.add_argument("--cores-per-node", type=int, default=48,
                   help="the profile's NODE_CORES: the forest's training takes a whole node")
    g.add_argument("--cpu-job-cores", type=int, default=8,
                   help="the profile's CPU_CORES: the cores of a cube job and of a forest map job")
    g.add_argument("--gpus-per-node", type=int, default=4)
    g.add_argument("--train-nodes", type=int, default=2, help="nodes of one training job (the Slurm profile's)")
    g.add_argument("--predict-nodes", type=int, default=1, help="nodes of one deep prediction job")
    a = ap.add_argument_group("assumptions (not measured here)")
    a.add_argument("--scenes", type=float, default=150, help="L2A scenes per tile-year at max_cloud_cover 80 (two orbits)")
    a.add_argument("--scene-gb", type=float, default=0.8, help="GB read per whole-tile scene (10 bands + SCL, COG)")
    a.add_argument("--staged-gb", type=float, default=560 / 30,
                   help="GB the stage-in stores a tile-year (whole band and SCL files; the seed study's own table: "
                        "560 GB for 30 tile-years)")
    a.add_argument("--stage-gbit", type=float, default=1.0,
                   help="the login node's (or data-mover partition's) link to the archive, Gbit/s: the stage-in's rate")
    a.add_argument("--gbit-per-job", type=float, default=2.0,
                   help="network read rate of one cube job, Gbit/s (stage.mode remote only: staged cubes read local files)")
    a.add_argument("--site-gbit", type=float, default=20.0, help="the site's total read rate from the archive, Gbit/s")
    a.add_argument("--classes", type=int, default=13, help="CLC level-2 classes present per tile-year")
    a.add_argument("--scaling", type=float, default=0.9, help="data-parallel efficiency of a multi-node training job")
    a.add_argument("--search-s", type=float, default=10, help="STAC search of one tile-year over the network, s")
    args = ap.parse_args()

    seed = yaml.safe_load(args.config.read_text())
    demo = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    overhead = startup_cpu()
    with tempfile.TemporaryDirectory() as tmp:
        results = args.demo_results or run_demo(Path(tmp))
        r = measured_rates(results, demo, overhead)
        demo_forest = demo_forest_px_s(results, demo)
    gpu = gpu_rates(args.gpu_figures, int((seed.get("model_params") or {}).get("lstm", {}).get("batch_size", 128)),
                    int((seed.get("predict") or {}).get("block_px", 256)))

    tiles, years = len(seed["tiles"]), len(seed["years"])
    maps = tiles * years
    per_class, fr = seed["sample"]["per_class"], seed["sample"]["fractions"]
    samples = per_class * args.classes  # per tile-year
    n_train = int(maps * samples * fr["train"])
    epochs = int((seed.get("model_params") or {}).get("lstm", {}).get("epochs", 40))
    cores = args.cores_per_node
    cpu_slots = lambda per_job: max(1, args.cpu_nodes * (cores // per_job))  # noqa: E731 - jobs at a time

    rows = []

    def stage(name: str, jobs: int, job_s: float, per_job_cores: int, slots: int, source: str) -> None:
        waves = math.ceil(jobs / slots)
        rows.append({"stage": name, "jobs": jobs, "job_min": job_s / 60, "at_once": min(jobs, slots),
                     "wall_h": waves * job_s / 3600, "core_h": jobs * job_s * per_job_cores / 3600, "source": source})

    stage("search", maps, args.search_s, 0, 1, "assumed (network; on the login node)")
    remote = (seed.get("stage") or {}).get("mode") == "remote"
    if not remote:  # one tile-year after another over the login node's link; no compute core hours
        stage("stage-in", maps, args.staged_gb * 8 / args.stage_gbit, 0, 1,
              f"{args.staged_gb:.1f} GB a tile-year at {args.stage_gbit:g} Gbit/s (stated), on the login node")
    cube = cube_figures(args.cube_figures)
    cube_rate = cube["cpu_s_per_px_scene"] if cube else r["cube"]["cpu_s_per_unit"]
    cube_cpu = cube_rate * TILE_PX * args.scenes
    many = args.cpu_job_cores
    cube_net = (args.scenes * args.scene_gb * 8 / min(args.gbit_per_job, args.site_gbit / min(maps, cpu_slots(many)))
                if remote else 0.0)
    cube_source = (f"a whole tile of {cube['dates']} scenes ({cube['file']}), scaled to {args.scenes:.0f} scenes"
                   if cube else "scaled from the demo's jobs")
    stage("cube", maps, max(cube_cpu / many, cube_net), many, cpu_slots(many),
          f"CPU {cube_source} ({cube_cpu / many / 60:.0f} min on {many} cores); "
          + (f"network assumed ({cube_net / 60:.0f} min)" if remote else "staged scenes, read locally"))
    labels = labels_figures(args.labels_figures)
    if labels:
        stage("labels", tiles, labels["cpu_s_per_px"] * TILE_PX, 2, cpu_slots(2),
              f"whole-tile jobs ({labels['file']}, median of {len(labels['cpu_s_each'])})")
    else:
        stage("labels", tiles, r["labels"]["cpu_s_per_unit"] * TILE_PX, 2, cpu_slots(2), "scaled from the demo's jobs")
    stage("sample", maps, r["sample"]["cpu_s_per_unit"] * samples, 2, cpu_slots(2), "scaled from the demo's jobs")
    rf_params = seed["model_params"]["rf"]
    forest = forest_figures(args.forest_figures, n_train, int(rf_params.get("min_samples_leaf", 1)))
    if forest:  # a forest fitted on the seed's rows with its leaf size: its fit's CPU a tree
        rf_cpu = forest["fit_s"] * forest["cores"] * rf_params["n_estimators"] / forest["trees"]
        source = (f"measured on {forest['rows']:,} rows ({forest['trees']} trees, {forest['file']}), "
                  f"{cores} cores (a node; linear)")
    else:
        rf_cpu = r["train_rf"]["cpu_s_per_unit"] * n_train * math.log2(n_train) * rf_params["n_estimators"]
        source = f"scaled from the demo's forest (n log n), {cores} cores (a node)"
    stage("train_rf", 1, rf_cpu / cores, cores, 1, source)
    ranks = args.train_nodes * args.gpus_per_node
    if gpu:
        rate = gpu["train_samples_per_s"] * ranks * args.scaling
        source = f"{gpu['device']} measured at batch {gpu['train_batch']}; x{ranks} GPUs at {args.scaling} assumed"
    else:
        rate = r["train_lstm_cpu"]["samples_per_s"] / r["train_lstm_cpu"]["ranks"] * ranks * args.scaling
        source = "CPU rank measured here; scaling assumed"
    stage("train lstm", 1, n_train * epochs / rate, args.train_nodes * cores, 1, source)
    lstm_training_s = rows[-1]["job_min"] * 60
    hpo = seed.get("hpo") or {}
    for model in hpo.get("models", []):
        one = lstm_training_s if model == "lstm" else rf_cpu / many
        stage(f"hpo {model}", hpo.get("trials", 20), one, many, hpo.get("workers", 2), "one training a trial (unpruned)")
    rf_map = r["predict_rf"]["cpu_s_per_unit"]
    # the rest of a map job as the demo's 256 px jobs give it: their fixed costs counted as per-pixel work
    demo_rest = max(rf_map - demo_forest[1] / demo_forest[0], 0.0)
    whole = whole_tile_map(args.map_figures)
    if whole:  # reading, preparing and writing as a whole-tile job measured them
        rest, rest_source = whole["rest_cpu_s_per_px"], f"the rest as a {whole['size']} px job ({whole['file']})"
    else:
        rest, rest_source = demo_rest, "the rest scaled from the demo's jobs"
    if forest:  # the demo forest's share of a map job's CPU replaced by that of a forest of the seed's size
        forest_part = forest["cores"] / forest["px_s"]
        rf_map = rest + forest_part
        source = (f"{many} cores (linear); its forest, {forest_part * TILE_PX / many / 60:.0f} of the minutes, one of "
                  f"{forest['rows']:,} rows ({forest['file']}); {rest_source}")
    else:
        source = f"measured on the demo, {many} cores (linear); the demo's forest (no --forest-figures)"
    stage("predict rf", maps, rf_map * TILE_PX / many, many, cpu_slots(many), source)
    if gpu:
        gpus = args.predict_nodes * args.gpus_per_node
        stage("predict lstm", maps, TILE_PX / (gpu["predict_px_s"] * gpus), args.predict_nodes * cores,
              max(1, args.gpu_nodes // args.predict_nodes),
              f"{gpu['device']} measured ({gpu['predict_px_s']:.0f} px/s a GPU, {gpu['predict_block']} px windows, "
              f"{gpu['predict_threads']} preparing threads on 16 cores); {cores // args.gpus_per_node} cores a GPU assumed enough")
    else:
        stage("predict lstm", maps, r["predict_lstm"]["cpu_s_per_unit"] * TILE_PX / cores, cores, args.cpu_nodes,
              "CPU measured here")
    consistent = consistent_figures(args.consistent_figures)
    if consistent:
        side = consistent["side"]
        grid = "a whole tile" if side ** 2 >= TILE_PX else f"{side} px, scaled to the tile's pixels"
        stage("consistent_maps", tiles * 2, consistent["cpu_s_per_px_year"] * TILE_PX * years, 1, cpu_slots(1),
              f"measured on {grid}, one core ({consistent['file']}), {consistent['years']} years scaled to {years}")
    else:
        stage("consistent_maps", tiles * 2, r["consistent_maps"]["cpu_s_per_unit"] * TILE_PX * years, 2, cpu_slots(2),
              "scaled from the demo's jobs")
    stage("assess", maps * 2, r["assess"]["cpu_s_per_unit"], 2, cpu_slots(2), "the demo's jobs (per map)")

    print(f"\nseed study: {args.config.relative_to(ROOT)}: {tiles} tiles x {years} years = {maps} tile-years of "
          f"{TILE_PX / 1e6:.1f} Mpx, models {', '.join(seed['models'])}; {n_train:,} training samples "
          f"({per_class} a class x {args.classes} classes x {fr['train']} train, {maps} tables), lstm {epochs} epochs")
    print(f"cluster (stated): {args.cpu_nodes} CPU nodes and {args.gpu_nodes} GPU nodes of {cores} cores "
          f"({args.gpus_per_node} GPUs each); training on {args.train_nodes} nodes, deep prediction on "
          f"{args.predict_nodes}")
    print("\nmeasured here (CPU s per unit, a job's lcflow start-up of "
          f"{overhead:.2f} CPU s taken off):")
    for name in ("cube", "labels", "sample", "train_rf", "predict_rf", "predict_lstm", "consistent_maps", "assess"):
        print(f"  {name:16s} {r[name]['cpu_s_per_unit']:.3e} CPU s per {r[name]['unit']}")
    print(f"  the demo's forest maps {demo_forest[0] / 1e3:.0f} k px/s here ({demo_forest[1]} cores, compiled, "
          "inputs prepared)")
    if forest:
        print(f"  a forest of the seed study's size ({forest['file']}: {forest['rows']:,} rows, min_samples_leaf "
              f"{forest['leaf']}, {forest['nodes_300'] / 1e6:.1f} M nodes and depth {forest['mean_depth']:.0f} as 300 "
              f"trees) maps {forest['px_s'] / 1e3:.0f} k px/s ({forest['cores']} cores): a forest map job "
              f"{rf_map:.3e} CPU s per px")
    if cube:
        print(f"  a whole tile's cube of {cube['dates']} scenes ({cube['file']}): {cube['cpu_s']:.0f} CPU s, "
              f"{cube['cpu_s'] / cube['plain_cpu_s']:.1f} times a plain read's {cube['plain_cpu_s']:.0f}: "
              f"{cube['cpu_s_per_px_scene']:.3e} CPU s per px x scene (the demo's jobs: {r['cube']['cpu_s_per_unit']:.3e})")
    if labels:
        print(f"  whole-tile labels jobs ({labels['file']}): {', '.join(f'{v:.0f}' for v in labels['cpu_s_each'])} "
              f"CPU s: {labels['cpu_s_per_px']:.3e} CPU s per px (the demo's jobs: {r['labels']['cpu_s_per_unit']:.3e})")
    if whole:
        print(f"  a forest map job of {whole['size']} px ({whole['file']}): {whole['cpu_s']:.0f} CPU s on {whole['cores']} "
              f"cores, of which its forest alone {whole['size'] ** 2 * whole['cores'] / whole['forest_px_s']:.0f}: the "
              f"rest {whole['rest_cpu_s_per_px']:.3e} CPU s per px (the demo's jobs: {demo_rest:.3e})")
    if consistent:
        lo, hi = consistent["spread"]
        print(f"  consistent maps at {consistent['side']} px, {consistent['years']} years, one core "
              f"({consistent['file']}): {consistent['cpu_s_per_px_year']:.3e} CPU s per px x year "
              f"({lo:.3e}-{hi:.3e} over {len(consistent['cpu_s_each'])} turns; the demo's jobs: "
              f"{r['consistent_maps']['cpu_s_per_unit']:.3e})")
    print(f"  lstm training on this CPU: {r['train_lstm_cpu']['samples_per_s']:.0f} samples/s "
          f"({r['train_lstm_cpu']['ranks']} ranks)")
    if gpu:
        print(f"  GPU ({gpu['device']}, {args.gpu_figures.name}): lstm training {gpu['train_samples_per_s']:.0f} samples/s "
              f"at batch {gpu['train_batch']}; prediction {gpu['predict_px_s']:.0f} px/s "
              f"({gpu['predict_threads']} preparing threads)")
    print(f"assumed: {args.scenes:.0f} scenes a tile-year, {args.staged_gb:.1f} GB staged a tile-year at "
          f"{args.stage_gbit:g} Gbit/s, {args.classes} classes, {args.scaling} "
          f"multi-node efficiency, {args.search_s:.0f} s a search; CPU work scales with cores")
    print(f"\n{'stage':16s} {'jobs':>5s} {'min a job':>10s} {'at once':>8s} {'wall h':>8s} {'core h':>9s}  source")
    for row in rows:
        print(f"{row['stage']:16s} {row['jobs']:5d} {row['job_min']:10.1f} {row['at_once']:8d} {row['wall_h']:8.2f} "
              f"{row['core_h']:9.1f}  {row['source']}")
    total, path = critical_path(rows)
    core_h = sum(row["core_h"] for row in rows)
    print(f"{'total':16s} {'':5s} {'':10s} {'':8s} {total:8.2f} {core_h:9.1f}  critical path: {' > '.join(path)}")
    print(f"{'':16s} {'':5s} {'':10s} {'':8s} {sum(row['wall_h'] for row in rows):8.2f} {'':9s}  "
          "(every stage one after another: an upper bound)")
    if not hpo.get("models"):
        from lcflow.defaults import default

        trials, workers = default("hpo.trials"), default("hpo.workers")
        print(f"(no hpo in {args.config.name}: a study of lstm at the schema's {trials} trials and {workers} workers, "
              f"each a training job as above, would add up to {math.ceil(trials / workers) * lstm_training_s / 3600:.2f} h"
              " wall, less what the pruner stops early)")


def critical_path(rows: list[dict]) -> tuple[float, list[str]]:
    """The wall hours of the longest chain of stages, and its stages: everything in turn but the forest's
    training and maps (CPU nodes) beside the deep models' studies, training and maps (GPU nodes), which
    Snakemake runs at once. Stages of a chain are taken whole, one after another (no overlap of waves)."""
    wall = {row["stage"]: row["wall_h"] for row in rows}
    forest = [s for s in wall if s in ("hpo rf", "train_rf", "predict rf")]
    deep = [s for s in wall if s.startswith(("hpo ", "train ", "predict ")) and s not in forest]
    before = [s for s in wall if s in ("search", "stage-in", "cube", "labels", "sample")]
    after = [s for s in wall if s not in (*before, *forest, *deep)]
    branch = max((forest, deep), key=lambda chain: sum(wall[s] for s in chain))
    path = [*before, *branch, *after]
    return sum(wall[s] for s in path), path


if __name__ == "__main__":
    main()
