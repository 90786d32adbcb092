"""GPU readiness, measured: what a centre needs to know before it gives lcflow GPU nodes.

- training samples/s of the deep models (``--models``: the LSTM at the seed study's parameters, TempCNN,
  L-TAE and presto at their defaults), fp32 against bf16 autocast (``amp``), at the demo's per-rank
  batch (128) and a GPU-sized one (1024); 1 against N ranks (torchrun, NCCL) where the node has N GPUs;
- with ``--collectives``, the first model trained again through the torch backend's collectives in a
  group of one rank (NCCL on a GPU), fp32 and fp16, against the same run without them and repeated;
- prediction through ``lcflow predict``'s own path (a cube read window by window, features, model,
  COGs written) on a cube tiled from the demo's to ``--side`` px: px/s, the GPU-busy fraction (NVML's
  utilisation, sampled every 0.1 s while the windows are mapped), peak GPU memory, and the whole-tile
  time (10980 x 10980 px, 12 steps) that rate implies;
- the network alone (features already on the GPU): the ceiling that prediction could reach.

Where torch sees no CUDA device it says so in one line and exits 0 (``make bench``). ``--device cpu``
runs every measurement on the CPU at small sizes, to check the benchmark itself. ``--json`` writes the
figures for ``seed_study.py``.
"""

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

HERE = Path(__file__).parent
#: ``lcflow`` as ``python -c``: the console script may not be installed where the benchmark runs
LCFLOW = "import sys; from lcflow.cli import main; sys.exit(main(sys.argv[1:]))"
#: lcflow predict's work without its command line (which checks configs, needing jsonschema)
PREDICT = "import sys; from lcflow.maps import predict; predict.run(*sys.argv[1:5], out_probabilities=sys.argv[5])"
TILE_PX = 10980
#: the seed study's LSTM (config/netherlands.yaml); TempCNN, L-TAE and presto at their defaults
MODELS = {"lstm": {"hidden_size": 64, "num_layers": 2, "bidirectional": True}, "tempcnn": {}, "ltae": {}, "presto": {}}


def train_rate(model: str, samples: list[str], work: Path, batch: int, amp: bool, steps: int) -> dict:
    """Steady samples/s of one training run (rounds after the first, which holds start-up)."""
    from lcflow.train import training

    params = {**MODELS[model], "epochs": 1, "min_steps": steps, "evaluations": 5, "patience": 100,
              "batch_size": batch, "amp": amp}
    out = work / f"{model}_{batch}_{'bf16' if amp else 'fp32'}"
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    metrics = training.train(model, samples, out, params)
    history = pd.read_csv(out / "history.csv")
    steady = history["samples_per_s"].iloc[1:] if len(history) > 1 else history["samples_per_s"]
    return {"model": model, "batch": batch, "precision": "bf16" if amp else "fp32",
            "samples_per_s": float(steady.median()), "wall_s": time.perf_counter() - started,
            "test_oa": metrics["test"]["overall_accuracy"], "out": str(out),
            "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else 0.0}


def train_ranks(model: str, samples: list[str], work: Path, ranks: int, batch: int, steps: int) -> float:
    """Steady samples/s of ``ranks`` GPUs under torchrun (torch backend, NCCL), per-rank batch ``batch``."""
    out = work / f"{model}_{ranks}ranks"
    cmd = [str(Path(sys.executable).parent / "torchrun"), "--standalone", "--nnodes=1", f"--nproc-per-node={ranks}",
           "--no-python", sys.executable, "-c", LCFLOW, "train", "--model", model, "--samples", *samples,
           "--out", str(out), "--backend", "torch", "--params", json.dumps(
               {**MODELS[model], "epochs": 1, "min_steps": steps, "evaluations": 5, "patience": 100,
                "batch_size": batch})]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return float(pd.read_csv(out / "history.csv")["samples_per_s"].iloc[1:].median())


def nccl_check(model: str, samples: list[str], work: Path, single_dir: str, batch: int, steps: int) -> dict:
    """The torch backend's collectives on this device (NCCL on a GPU), in a process group of one rank: a
    training run through them (averaged gradients, plain and fp16, metrics allreduced, state broadcast)
    against the same run without them (``single_dir``). One rank's average is its own gradient, so the
    weights should agree up to the GPU's own run-to-run differences (the same run once more without them:
    ``repeat``), which the fp16 pass adds rounding to."""
    import socket

    from lcflow.train import training
    from lcflow.train.parallel import distributed

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    comm = distributed.TorchDistributed(distributed.Rendezvous(0, 1, 0, "127.0.0.1", port, "torchrun"))
    backend = comm.dist.get_backend()
    connect = training.connect
    reference = torch.load(Path(single_dir) / "model.pt", map_location="cpu", weights_only=True)
    out: dict = {"model": model, "backend": backend}
    try:
        for fp16 in (None, False, True):
            training.connect = connect if fp16 is None else (lambda *a, **k: comm)
            run = work / f"{model}_{'repeat' if fp16 is None else 'nccl_fp16' if fp16 else 'nccl_fp32'}"
            started = time.perf_counter()
            metrics = training.train(model, samples, run, {**MODELS[model], "epochs": 1, "min_steps": steps,
                                                           "evaluations": 5, "patience": 100, "batch_size": batch,
                                                           "amp": False, "fp16_allreduce": bool(fp16)})
            weights = torch.load(run / "model.pt", map_location="cpu", weights_only=True)
            gap = max(float((weights[k].float() - reference[k].float()).abs().max()) for k in reference)
            history = pd.read_csv(run / "history.csv")
            out["repeat" if fp16 is None else "fp16" if fp16 else "fp32"] = {
                "largest_weight_gap": gap, "test_oa": metrics["test"]["overall_accuracy"],
                "samples_per_s": float(history["samples_per_s"].iloc[1:].median()),
                "wall_s": time.perf_counter() - started}
    finally:
        training.connect = connect
    return out


class GpuBusy:
    """NVML's utilisation of GPU 0 (share of time a kernel ran), sampled in a thread."""

    def __init__(self, every: float = 0.1) -> None:
        self.samples: list[int] = []
        self.every, self._stop = every, threading.Event()
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        except Exception:  # no NVML (a CPU run): no figure
            self.nvml = None

    def __enter__(self) -> "GpuBusy":
        if self.nvml is not None:
            self.thread = threading.Thread(target=self._sample, daemon=True)
            self.thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)

    def __exit__(self, *exc) -> None:
        self._stop.set()

    @property
    def fraction(self) -> float:
        return float(np.mean(self.samples)) / 100 if self.samples else float("nan")


class _Rates(logging.Handler):
    """The window loop's px/s, from the progress lines ``lcflow predict`` logs."""

    def __init__(self) -> None:
        super().__init__()
        self.rates: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(r"windows, (\d+) px/s", record.getMessage())
        if found:
            self.rates.append(float(found.group(1)))


def predict_rate(model_dir: str, cube: Path, work: Path, block: int, threads: int | None = None) -> dict:
    """``lcflow predict`` in this process on ``cube``: px/s in all and of the window loop, GPU busy, peak
    memory; ``threads`` fixes the number of threads that prepare windows (default: lcflow's choice)."""
    from lcflow.common.raster import Grid
    from lcflow.maps import predict

    chosen = predict.preparing_threads
    if threads is not None:
        predict.preparing_threads = lambda *a, **k: threads

    rates = _Rates()
    logging.getLogger("lcflow").addHandler(rates)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    grid = Grid.of(cube)
    started = time.perf_counter()
    with GpuBusy() as busy:
        predict.run(model_dir, cube, work / "map.tif", work / "confidence.tif", block=block,
                    out_probabilities=work / "probabilities.tif")
    wall = time.perf_counter() - started
    predict.preparing_threads = chosen
    used = threads or chosen(torch.cuda.is_available(), block * block, 12, 10)
    logging.getLogger("lcflow").removeHandler(rates)
    for name in ("map.tif", "confidence.tif", "probabilities.tif"):
        (work / name).unlink()
    return {"block": block, "threads": used, "px": grid.width * grid.height, "wall_s": wall,
            "px_s": grid.width * grid.height / wall, "loop_px_s": rates.rates[-1] if rates.rates else float("nan"),
            "gpu_busy": busy.fraction,
            "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else 0.0}


@torch.no_grad()
def network_rate(model_dir: str, batch: int, steps: int, seconds: float = 3.0) -> float:
    """px/s of the network alone, inputs already on its device, bf16 autocast on GPU as prediction runs it."""
    from lcflow.train.model_dirs.model_dir import TrainedModel

    trained = TrainedModel.load(model_dir)
    net, device = trained.model.net, trained.model.device
    net.eval()
    # the prepared input: bands and the observed flag at every step, then latitude and longitude for a model
    # that uses the pixel's position
    width = len(trained.bands) + 1 + (2 if trained.model.uses_position else 0)
    x = torch.randn(batch, steps, width, device=device)
    if trained.model.uses_position:
        x[..., -2:] = torch.tensor([52.0, 5.0], device=device)  # a pixel in the Netherlands, every step
    done, started = 0, None
    while True:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            torch.softmax(net(x).float(), dim=1)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if started is None:  # the first batch warms up
            started = time.perf_counter()
            continue
        done += batch
        if time.perf_counter() - started > seconds:
            return done / (time.perf_counter() - started)


def agreement(model_dir: str, cube: Path, work: Path) -> dict:
    """The map of ``cube`` on this device against the CPU's (another process): bf16 autocast on the GPU
    against fp32 on the CPU, so the share of pixels of the same class and the largest probability gap."""
    import rasterio

    maps = {}
    for where, env in (("here", {}), ("cpu", {"CUDA_VISIBLE_DEVICES": ""})):
        out = work / f"agree_{where}"
        done = subprocess.run([sys.executable, "-c", PREDICT, model_dir, str(cube), f"{out}_map.tif",
                               f"{out}_conf.tif", f"{out}_proba.tif"], capture_output=True, text=True,
                               env={**os.environ, **env})
        if done.returncode:
            raise RuntimeError(f"lcflow predict ({where}) failed:\n{done.stderr[-3000:]}")
        with rasterio.open(f"{out}_map.tif") as m, rasterio.open(f"{out}_proba.tif") as p:
            maps[where] = (m.read(1), p.read().astype(np.int16))
    same = float(np.mean(maps["here"][0] == maps["cpu"][0]))
    return {"same_class": same, "max_probability_gap": int(np.abs(maps["here"][1] - maps["cpu"][1]).max()) / 254}


def demo_inputs(work: Path) -> tuple[list[str], Path]:
    from shared import demo_cube

    cube, samples = demo_cube(work)
    return [str(samples)], cube


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", nargs="+", help="samples tables (default: the demo's, built here)")
    ap.add_argument("--cube", help="a cube to tile (default: the demo's)")
    ap.add_argument("--side", type=int, default=4096, help="side of the tiled cube to predict, px")
    ap.add_argument("--blocks", default="256,1024", help="prediction windows to measure, px a side")
    ap.add_argument("--steps", type=int, default=400, help="optimizer steps per training run")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--json", help="write the figures here (for seed_study.py)")
    ap.add_argument("--models", default=",".join(MODELS), help="deep models to measure, comma-separated")
    ap.add_argument("--skip-one-thread", action="store_true", help="measure lcflow's choice of preparing threads only")
    ap.add_argument("--collectives", action="store_true",
                    help="train the first model again through the torch backend's collectives (NCCL on a GPU)")
    ap.add_argument("--quick-training", action="store_true",
                    help="train each model once (batch 1024, fp32), for the prediction figures alone")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"gpu: skipped, torch {torch.__version__} sees no CUDA device")
        return
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger().handlers[0].setLevel(logging.WARNING)  # lcflow's progress lines are read, not shown
    logging.getLogger("lcflow").setLevel(logging.INFO)
    from shared import tiled_cube

    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU"
    print(f"device: {name}; torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{torch.cuda.device_count() if args.device == 'cuda' else 0} GPU(s), {os.cpu_count()} CPU cores", flush=True)
    figures: dict = {"device": name, "torch": torch.__version__, "train": [], "predict": [], "network": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        samples, cube = (args.samples, Path(args.cube)) if args.samples and args.cube else demo_inputs(work)
        print("\ntraining (one rank): steady samples/s, median of the rounds after the first", flush=True)
        trained = {}
        models = args.models.split(",")
        for model in models:
            for batch in (1024,) if args.quick_training else (128, 1024):
                for amp in (False,) if args.quick_training else (False, True):
                    r = train_rate(model, samples, work, batch, amp, args.steps)
                    figures["train"].append(r)
                    trained.setdefault(model, r["out"])
                    print(f"  {model:8s} batch {batch:5d} {r['precision']}: {r['samples_per_s']:9.0f} samples/s, "
                          f"test OA {r['test_oa']:.3f}, peak GPU memory {r['peak_gpu_mb']:.0f} MB", flush=True)
            fp32 = {r["batch"]: r["samples_per_s"] for r in figures["train"] if r["model"] == model and r["precision"] == "fp32"}
            bf16 = {r["batch"]: r["samples_per_s"] for r in figures["train"] if r["model"] == model and r["precision"] == "bf16"}
            if bf16:
                print(f"  {model}: bf16/fp32 {', '.join(f'{bf16[b] / fp32[b]:.2f} at batch {b}' for b in fp32)}")
        gpus = torch.cuda.device_count() if args.device == "cuda" else 0
        if args.collectives:
            model = models[0]
            single = next(r for r in figures["train"] if r["model"] == model and r["precision"] == "fp32")
            c = nccl_check(model, samples, work, single["out"], single["batch"], args.steps)
            figures["collectives"] = c
            print(f"  {model}: the torch backend's collectives ({c['backend']}, one rank) against none, batch "
                  f"{single['batch']}: largest weight gap {c['fp32']['largest_weight_gap']:.2e} (fp32 allreduce), "
                  f"{c['fp16']['largest_weight_gap']:.2e} (fp16), {c['repeat']['largest_weight_gap']:.2e} (the run "
                  f"repeated without them); test OA {single['test_oa']:.3f} / {c['fp32']['test_oa']:.3f} / "
                  f"{c['fp16']['test_oa']:.3f} / {c['repeat']['test_oa']:.3f}; {c['fp32']['samples_per_s']:.0f} "
                  f"samples/s", flush=True)
        if gpus > 1:
            for model in models:
                one = next(r["samples_per_s"] for r in figures["train"]
                           if r["model"] == model and r["batch"] == 1024 and r["precision"] == "fp32")
                many = train_ranks(model, samples, work, gpus, 1024, args.steps)
                figures["train"].append({"model": model, "batch": 1024, "ranks": gpus, "samples_per_s": many})
                print(f"  {model}: {gpus} ranks (NCCL) {many:.0f} samples/s, scaling efficiency {many / (gpus * one):.2f}")
        else:
            print(f"  1 against N ranks: this node has {gpus} GPU(s); the comparison needs several")

        side = args.side if args.device == "cuda" else min(args.side, 512)
        big = work / f"cube_{side}.tif"
        started = time.perf_counter()
        tiled_cube(cube, side, big)
        print(f"\nprediction: lcflow predict on a {side} x {side} px cube (the demo's tiled; written in "
              f"{time.perf_counter() - started:.0f} s), probabilities written too", flush=True)
        from lcflow.common.raster import read_tag

        steps = len(read_tag(big, "time_steps"))
        for model, model_dir in trained.items():
            blocks = [int(b) for b in args.blocks.split(",")]
            # one preparing thread, then lcflow's choice
            runs = ([] if args.skip_one_thread else [(blocks[0], 1)]) + [(b, None) for b in blocks]
            for block, threads in runs:
                r = predict_rate(model_dir, big, work, block, threads)
                r["model"] = model
                figures["predict"].append(r)
                print(f"  {model:8s} windows {block:5d} px, {r['threads']} preparing thread(s): {r['px_s']:10.0f} px/s in all, window loop "
                      f"{r['loop_px_s']:10.0f} px/s, GPU busy {r['gpu_busy']:.2f}, peak GPU memory "
                      f"{r['peak_gpu_mb']:.0f} MB; a whole tile ({TILE_PX} px, {steps} steps): "
                      f"{TILE_PX ** 2 / r['loop_px_s'] / 60:.1f} min", flush=True)
            if args.device == "cuda":
                a = agreement(model_dir, cube, work)
                figures.setdefault("agreement", []).append({"model": model, **a})
                print(f"  {model:8s} GPU map (bf16) against the CPU's (fp32), {cube.name}: {a['same_class']:.4%} of "
                      f"pixels the same class, largest probability gap {a['max_probability_gap']:.3f}", flush=True)
            for batch in (8192, 65536):
                rate = network_rate(model_dir, batch, steps)
                figures["network"].append({"model": model, "batch": batch, "px_s": rate})
                print(f"  {model:8s} network alone, batch {batch}: {rate:12.0f} px/s (a whole tile: "
                      f"{TILE_PX ** 2 / rate:.0f} s)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
