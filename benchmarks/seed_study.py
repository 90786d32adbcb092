"""The seed study (config/netherlands.yaml: 10 whole tiles x 2018-2020, rf and lstm) end to end on a stated
cluster, projected from per-stage rates measured in this run.

Each stage's rate comes from the demo's own jobs, run here (``snakemake --profile profiles/local`` in a
scratch directory, or ``--demo-results`` of a finished ``make demo``): the CPU seconds Snakemake's
``benchmark:`` measured per job, less the start-up of an ``lcflow`` process (measured here too), per unit of
that stage's work (pixels x scenes for a cube, samples for sampling and training, pixels for a map). GPU
stages take the figures ``benchmarks/gpu.py`` measured on a GPU (``--gpu-figures``; the repository holds an
H100's), else this machine's CPU rate. A forest's map cost grows with the forest, and the demo's forest
learns from a few thousand rows: the forest's part of a map job (the demo forest's compiled rate, measured
here) is replaced by that of a forest of the seed study's rows and leaf size (``--forest-figures``, written
by ``forest_size.py --json``), whose fit is also the forest's training. A demo job covers 65,536 px, so its
fixed costs (imports, loading a model, writing COGs) count as per-pixel work and swing with the machine's
load: where larger jobs were measured, they are taken instead and the demo's rate printed beside them as a
cross-check: the cube from a whole tile's (``--cube-figures``, ``cube_whole_tile.py --json``), the labels
from whole-tile jobs (``--labels-figures``, ``labels_vs_gdalwarp.py --json``), the rest of a forest map job
(reading, preparing, writing) from a whole-tile job (``--map-figures``, ``predict_tile_sizes.py --json``),
the consistent maps from a whole-tile series on one core (``--consistent-figures``,
``consistent_maps_speed.py --json``, with the spread of its turns; the compile of its kernels, which the
first jobs of a fresh install pay, from ``--consistent-compile``, ``consistent_maps_speed.py --cold
--json``). Network reads, scene counts and sizes, classes present, and scaling across cores and nodes are
assumptions, printed as such. Each stage's wall time is its jobs in waves as the cluster holds them, with
the cores the Slurm profile gives a job (``CPU_CORES`` for the cube and the forest's maps, a whole node for
the forest's training). The total is the critical path: the stages in turn, but the forest's training and
maps beside the deep model's on the GPU nodes, as Snakemake runs them; the sum of every stage is printed
beside it as an upper bound. Prints every input and the projection per stage.
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
    """The GPU figures nearest the seed study's settings, per model: training at its per-rank batch (fp32, one
    rank), prediction at its window size with lcflow's choice of preparing threads; of the latest session
    (``date``; none: the first) that measured each model, where the file holds several."""
    if path is None or not path.exists():
        return None
    fig = json.loads(path.read_text())

    def latest(rows: list[dict]) -> list[dict]:
        last = max(r.get("date", "") for r in rows)
        return [r for r in rows if r.get("date", "") == last]

    train, predict = {}, {}
    for model in sorted({r["model"] for r in fig["train"]}):
        runs = latest([r for r in fig["train"] if r["model"] == model and r.get("precision", "fp32") == "fp32"
                       and "ranks" not in r])
        if runs:
            train[model] = min(runs, key=lambda r: abs(r["batch"] - batch))["samples_per_s"]
    at_block = None
    for model in sorted({r["model"] for r in fig["predict"]}):
        pred = latest([r for r in fig["predict"] if r["model"] == model])
        at_block = min(pred, key=lambda r: abs(r["block"] - block))["block"]
        runs = [r for r in pred if r["block"] == at_block]
        best = max(runs, key=lambda r: (r.get("threads", 1), r["loop_px_s"]))
        predict[model] = best["loop_px_s"]
        threads = best.get("threads")
    return {"device": fig["device"], "batch": batch, "train_samples_per_s_per_gpu": train,
            "predict_px_s_per_gpu": predict, "block": at_block, "threads": threads, "file": path.name}


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


def compile_figures(path: Path | None) -> dict | None:
    """``consistent_maps_speed.py --cold --json``: the CPU seconds of compiling the consistent maps' numba
    kernels, which each job that starts before they are cached pays (the demo's run here had them cached)."""
    if path is None or not path.exists():
        return None
    sides = [s for s in json.loads(path.read_text())["sides"] if "compile_cpu_s" in s]
    return {"compile_cpu_s": float(np.median([s["compile_cpu_s"] for s in sides])), "file": path.name} if sides else None


def demo_forest_px_s(results: Path, demo: dict) -> tuple[float, int]:
    """The compiled map rate here of the demo run's forest, on every pixel of its first tile-year's cube,
    prepared beforehand, timed as forest_size.py times a forest; and the cores it ran on."""
    cube = results / demo["tiles"][0] / str(demo["years"][0]) / "cube.tif"
    return forest_map_rate(results / "models" / "rf", cube), len(os.sched_getaffinity(0))


def demo_jobs(results: Path) -> dict[str, list[float]]:
    """CPU seconds of each of the demo run's jobs, per stage (a model's jobs of a stage apart)."""
    from lcflow import job_resources

    jobs = job_resources.read(results / "benchmarks")
    by: dict[str, list[float]] = {}
    for row in jobs.itertuples():
        if str(row.job).endswith("_summary"):
            continue
        key = row.stage
        if row.stage in ("predict", "train", "hpo"):
            key = f"{row.stage}_{str(row.job).split('_')[-2 if row.stage == 'hpo' else -1]}"
        by.setdefault(key, []).append(float(row.cpu_s))
    return by


def build_rates(results: Path, demo: dict, overhead: float, args: argparse.Namespace) -> dict:
    """Every rate a budget needs (lcflow.budget.rates), from the demo's jobs and the larger measured jobs."""
    from lcflow.budget.rates import affine

    r = measured_rates(results, demo, overhead)
    jobs = demo_jobs(results)
    tile_years = [(t, y) for t in demo["tiles"] for y in demo["years"]]
    cube_px = {ty: px(results / ty[0] / str(ty[1]) / "cube.tif") for ty in tile_years}
    scenes = {ty: len(json.loads((results / ty[0] / str(ty[1]) / "items.json").read_text())["features"])
              for ty in tile_years}
    samples = {ty: pq.read_metadata(results / ty[0] / str(ty[1]) / "samples.parquet").num_rows for ty in tile_years}
    years, models = len(demo["years"]), demo["models"]
    first = {t: cube_px[(t, demo["years"][0])] for t in demo["tiles"]}

    def stage(name: str, units: float, large: float | None, unit: str, source: str, large_source: str = "") -> dict:
        cpu = jobs[name]
        fit = affine(sum(cpu), len(cpu), units, overhead, large)
        said = f"{large_source}; a job's fixed part from the demo's {len(cpu)} jobs" if large is not None else source
        return {**fit, "unit": unit, "source": said}

    def per_job(name: str) -> dict:
        cpu = jobs[name]
        return {"fixed_cpu_s": float(np.mean(cpu)), "cpu_s_per_unit": 0.0, "unit": "job",
                "source": f"the demo's {len(cpu)} jobs"}

    cube = cube_figures(args.cube_figures)
    labels = labels_figures(args.labels_figures)
    consistent = consistent_figures(args.consistent_figures)
    whole = whole_tile_map(args.map_figures)
    demo_forest = demo_forest_px_s(results, demo)
    rf = json.loads((results / "models" / "rf" / "metrics.json").read_text())
    # the demo's forest maps less their forest's share (its compiled rate, measured here): reading, preparing, writing
    rf_cpu, rf_px = sum(jobs["predict_rf"]), sum(cube_px.values())
    rest_cpu = max(rf_cpu - demo_forest[1] / demo_forest[0] * rf_px, 0.1 * rf_cpu)
    rates = {"jobs": {
        "search": per_job("search"),
        "stage": per_job("stage"),
        "cube": stage("cube", sum(cube_px[ty] * scenes[ty] for ty in tile_years),
                      cube["cpu_s_per_px_scene"] if cube else None, "px x scene", "the demo's jobs",
                      f"a whole tile of {cube['dates']} scenes ({cube['file']}), as if linear in scenes" if cube else ""),
        "labels": stage("labels", sum(first.values()), labels["cpu_s_per_px"] if labels else None, "px",
                        "the demo's jobs", f"whole-tile jobs ({labels['file']})" if labels else ""),
        "sample": stage("sample", sum(samples.values()), None, "sample", "the demo's jobs"),
        "predict_rest": {**affine(rest_cpu, len(jobs["predict_rf"]), rf_px, overhead,
                                  whole["rest_cpu_s_per_px"] if whole else None), "unit": "px",
                         "source": f"a {whole['size']} px job ({whole['file']})" if whole else "the demo's jobs"},
        "consistent_maps": stage("consistent_maps", sum(first.values()) * years * len(models),
                                 consistent["cpu_s_per_px_year"] if consistent else None, "px x year",
                                 "the demo's jobs", f"a whole tile on one core ({consistent['file']})"
                                 if consistent else ""),
        **{k: per_job(k) for k in ("assess", "quicklook", "change_figure", "design_sample", "learning_curve")},
        **{f"predict_{m}_cpu": stage(f"predict_{m}", rf_px, None, "px", "the demo's CPU jobs")
           for m in models if m != "rf" and f"predict_{m}" in jobs},
    }}
    compiled = compile_figures(args.consistent_compile)
    if compiled:
        rates["jobs"]["consistent_maps"]["compile_cpu_s"] = compiled["compile_cpu_s"]
        rates["jobs"]["consistent_maps"]["source"] += f"; its kernels' compile from {compiled['file']}"
    forests = []
    for fit in (json.loads(args.forest_figures.read_text())["fits"] if args.forest_figures.exists() else []):
        forests.append({"rows": fit["rows"], "leaf": fit["leaf"], "trees": fit["trees"],
                        "fit_cpu_s_per_tree": fit["fit_s"] * fit["cores"] / fit["trees"],
                        "map_cpu_s_per_px_300_trees": fit["cores"] / fit["map_px_s_300_trees"],
                        "source": args.forest_figures.name})
    trees = rf["params"]["n_estimators"]
    forests.append({"rows": rf["n_train"], "leaf": rf["params"]["min_samples_leaf"], "trees": trees,
                    "fit_cpu_s_per_tree": max(sum(jobs["train_rf"]) - overhead, 0.1) / trees,
                    "map_cpu_s_per_px_300_trees": demo_forest[1] / demo_forest[0] * trees / 300,
                    "source": "the demo's forest"})
    deep_cpu = {}
    for m in models:
        path = results / "models" / m / "metrics.json"
        if m != "rf" and path.exists():
            metrics = json.loads(path.read_text())
            deep_cpu[m] = {"samples_per_s_per_rank": metrics["samples_per_s"] / metrics["world_size"],
                           "source": f"the demo's {m} on {metrics['world_size']} one-thread CPU ranks here"}
    seed = yaml.safe_load(args.config.read_text())
    gpu = gpu_rates(args.gpu_figures, int((seed.get("model_params") or {}).get("lstm", {}).get("batch_size", 128)),
                    int((seed.get("predict") or {}).get("block_px", 256)))
    cores = len(os.sched_getaffinity(0))
    return {"measured": f"{time.strftime('%Y-%m-%d')} on {cores} cores by benchmarks/seed_study.py "
                        "(benchmarks/measured/seed_study_2core.txt)",
            "startup_cpu_s": overhead, "jobs": rates["jobs"], "forests": forests, "deep_cpu": deep_cpu,
            **({"gpu": gpu} if gpu else {}),
            "assumed": {"scenes": args.scenes, "scene_gb": args.scene_gb, "staged_gb_a_whole_tile_year": args.staged_gb,
                        "stage_gbit": args.stage_gbit, "gbit_per_job": args.gbit_per_job, "site_gbit": args.site_gbit,
                        "classes": args.classes, "scaling": args.scaling, "search_s": args.search_s},
            "demo_per_unit": {k: v["cpu_s_per_unit"] for k, v in r.items() if "cpu_s_per_unit" in v}}


def main() -> None:
    from lcflow.budget import cluster, projection, work
    from lcflow.config.loading import merge

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demo-results", type=Path, help="results/ of a finished make demo (default: run it here)")
    ap.add_argument("--rates", type=Path, help="also write the rates to this file (lcflow budget's: "
                    "workflow/lcflow/budget/rates.json)")
    ap.add_argument("--rates-in", type=Path, help="project from these rates (written by an earlier --rates) "
                    "instead of measuring: the projection again after a change to lcflow.budget")
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
    ap.add_argument("--consistent-compile", type=Path,
                    default=ROOT / "benchmarks" / "measured" / "consistent_maps_compile_1core.json",
                    help="consistent_maps_speed.py --cold --json: the compile of the consistent maps' kernels")
    ap.add_argument("--config", type=Path, default=ROOT / "config" / "netherlands.yaml")
    g = ap.add_argument_group("the cluster: profiles/slurm's site values, and the nodes held at once (stated)")
    g.add_argument("--cpu-nodes", type=int, default=8)
    g.add_argument("--gpu-nodes", type=int, default=4)
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

    demo = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    if args.rates_in:
        rates = json.loads(args.rates_in.read_text())
        overhead = rates["startup_cpu_s"]
        print(f"rates from {args.rates_in} (measured {rates['measured']})")
    else:
        overhead = startup_cpu()
        with tempfile.TemporaryDirectory() as tmp:
            results = args.demo_results or run_demo(Path(tmp))
            rates = build_rates(results, demo, overhead, args)
    if args.rates:
        args.rates.write_text(json.dumps(rates, indent=1) + "\n")
    seed = merge([args.config])
    todo = work.from_config(seed, ROOT / seed["results"], args.scenes, args.classes)
    where = cluster.from_profile(ROOT / "profiles" / "slurm", args.cpu_nodes, args.gpu_nodes)
    rows = projection.project(todo, rates, where)

    print(f"\nseed study: {args.config.relative_to(ROOT)}: {len(todo.tiles)} tiles x {todo.years} years = "
          f"{len(todo.tile_years)} tile-years, models {', '.join(todo.models)}; {todo.n_train:,} training rows")
    print(f"cluster: {where.name}; CPU jobs of {where.cpu_job_cores} cores, nodes of {where.node_cores}, "
          f"{where.gpus_per_node} GPUs a GPU node, training on {where.train_nodes} nodes")
    print(f"\n{'measured' if args.rates_in else 'measured here'} (a job's lcflow start-up {overhead:.2f} CPU s):")
    for name, rate in rates["jobs"].items():
        demo_rate = rates["demo_per_unit"].get(name)
        print(f"  {name:18s} {rate['fixed_cpu_s']:7.2f} CPU s a job + {rate['cpu_s_per_unit']:.3e} per {rate['unit']}"
              f"  ({rate['source']}" + (f"; the demo's jobs alone: {demo_rate:.3e} per unit)" if demo_rate else ")")
              + (f"; {rate['compile_cpu_s']:.1f} CPU s compiling in each job that starts before its kernels are "
                 "cached" if "compile_cpu_s" in rate else ""))
    for fit in rates["forests"]:
        print(f"  forest of {fit['rows']:,} rows, min_samples_leaf {fit['leaf']} ({fit['source']}): fit "
              f"{fit['fit_cpu_s_per_tree']:.2f} CPU s a tree, map {fit['map_cpu_s_per_px_300_trees']:.3e} CPU s a px "
              "as 300 trees")
    for m, fig in rates["deep_cpu"].items():
        print(f"  {m} training on this CPU: {fig['samples_per_s_per_rank']:.0f} samples/s a one-thread rank")
    if "gpu" in rates:
        gpu = rates["gpu"]
        print(f"  GPU ({gpu['device']}, {gpu['file']}): training at batch {gpu['batch']} "
              + ", ".join(f"{m} {v:.0f}" for m, v in gpu["train_samples_per_s_per_gpu"].items())
              + f" samples/s; maps at {gpu['block']} px windows " + ", ".join(
                  f"{m} {v:.0f}" for m, v in gpu["predict_px_s_per_gpu"].items()) + " px/s")
    print(f"assumed: {args.scenes:.0f} scenes a tile-year, {args.staged_gb:.1f} GB staged a tile-year at "
          f"{args.stage_gbit:g} Gbit/s, {args.classes} classes, {args.scaling} multi-node efficiency, "
          f"{args.search_s:.0f} s a search; CPU work scales with cores")
    for line in todo.said:
        print(f"  {line}")
    print()
    print(projection.table(rows))
    from lcflow.budget import footprint
    from lcflow.retrieve.stage_settings import StageSettings

    print()
    for line in footprint.of(rows, todo).lines(StageSettings.from_config(seed.get("stage")).dir, seed["results"],
                                               where.login_node):
        print(line)
    if not todo.hpo_models:
        from lcflow.defaults import default

        trials, workers = default("hpo.trials"), default("hpo.workers")
        train = next(r for r in rows if r.stage == "train lstm")
        print(f"(no hpo in {args.config.name}: a study of lstm at the schema's {trials} trials and {workers} workers, "
              f"each a training job as above, would add up to {math.ceil(trials / workers) * train.job_s / 3600:.2f} h"
              " wall, less what the pruner stops early)")


if __name__ == "__main__":
    main()
