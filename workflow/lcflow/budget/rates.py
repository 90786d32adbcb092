"""The measured rates a budget is projected from. ``benchmarks/seed_study.py --rates`` writes them from
its run (the demo's jobs, whole-tile jobs, a forest of the seed study's size, a GPU's figures) into
``rates.json`` beside this module, together with the projection it printed; ``lcflow budget`` reads them.

A job's CPU seconds are ``fixed_cpu_s + cpu_s_per_unit x units``: the fixed part (start-up, imports,
loading a model) from the demo's small jobs, the rate per unit from the largest jobs measured, so that a
demo-sized job and a whole tile are both projected from what was measured nearest them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from lcflow.errors import LcflowError

RATES = Path(__file__).with_name("rates.json")


def load(path: Path | None = None) -> dict[str, Any]:
    """The rates of ``path`` (default: the package's)."""
    path = path or RATES
    try:
        rates = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise LcflowError(
            f"rates {path}: unreadable ({exc}); benchmarks/seed_study.py --rates writes them"
        ) from None
    missing = {"jobs", "forests", "deep_cpu", "assumed"} - set(rates)
    if missing:
        raise LcflowError(
            f"rates {path}: no {', '.join(sorted(missing))}; benchmarks/seed_study.py --rates writes them"
        )
    _check_numbers(rates, path)
    return rates


#: rates a projection divides by, or multiplies into every job: zero is no rate
_POSITIVE = ("samples_per_s_per_rank", "rows", "trees", "fit_cpu_s_per_tree")


def _check_numbers(node: Any, path: Path, where: str = "") -> None:
    """Refuse, naming the key, a rate that is not a finite number at least 0 (or above 0: the assumptions,
    and what a projection divides by), which would end in a ZeroDivisionError or a negative budget."""
    if isinstance(node, dict):
        for key, value in node.items():
            _check_numbers(value, path, f"{where}.{key}" if where else str(key))
        return
    if isinstance(node, list):
        for i, value in enumerate(node):
            _check_numbers(value, path, f"{where}[{i}]")
        return
    if isinstance(node, bool) or not isinstance(node, int | float):
        return
    positive = where.startswith("assumed.") or where.rpartition(".")[2] in _POSITIVE
    if not math.isfinite(node) or node < 0 or (positive and node == 0):
        raise LcflowError(
            f"rates {path}: {where} = {node!r} is not a finite number "
            f"{'above' if positive else 'at least'} 0; benchmarks/seed_study.py --rates writes them"
        )


def for_gpu_type(rates: dict, gpu_type: str, speed: float | None) -> dict:
    """``rates`` for the site's GPU type (the profile's GPU_TYPE): as measured where the measured device is
    of that type (or none is named); else scaled by ``speed``, the site's GPU against the measured one, and
    said so in the device's name; refused in one line where no speed is given."""
    gpu = rates.get("gpu")
    if gpu is None or (not gpu_type and speed is None):
        return rates
    measured = gpu["device"]
    if speed is None:
        if gpu_type.lower() in measured.lower().replace("-", ""):
            return rates
        raise LcflowError(
            f"site value GPU_TYPE={gpu_type!r}: the rates measure an {measured} alone; give --gpu-speed "
            f"RATIO (a {gpu_type}'s training and map rate against the {measured}'s, e.g. from "
            "benchmarks/gpu.py run on one), or --rates of the site's own run"
        )
    scaled = {
        **gpu,
        "device": f"{gpu_type or 'the site GPU'} taken as {speed:g} x the measured {measured} (--gpu-speed)",
        "train_samples_per_s_per_gpu": {
            m: v * speed for m, v in gpu["train_samples_per_s_per_gpu"].items()
        },
        "predict_px_s_per_gpu": {m: v * speed for m, v in gpu["predict_px_s_per_gpu"].items()},
    }
    return {**rates, "gpu": scaled}


def job_cpu_s(rates: dict, stage: str, units: float = 0.0) -> float:
    """CPU seconds of one ``stage`` job of ``units`` units of work."""
    rate = rates["jobs"][stage]
    return rate["fixed_cpu_s"] + rate.get("cpu_s_per_unit", 0.0) * units


def affine(
    demo_cpu_s: float,
    demo_jobs: int,
    demo_units: float,
    startup_cpu_s: float,
    large_cpu_s_per_unit: float | None = None,
) -> dict[str, float]:
    """A stage's fixed and per-unit CPU from the demo's jobs and, where a large job was measured, its rate
    per unit: the fixed part is then what the demo's jobs spent beyond that rate (at least a process's
    start-up). Without a large job, the fixed part is the start-up and the rest of the demo's CPU is per unit.

    Args:
        demo_cpu_s: the CPU seconds of the demo's jobs of the stage, all together.
        demo_jobs: how many jobs those were.
        demo_units: the units of work they did in all (pixels, rows, ...).
        startup_cpu_s: a process's start-up: the least a job costs.
        large_cpu_s_per_unit: the rate per unit of a large job, where one was measured; None: none.
    """
    if large_cpu_s_per_unit is not None:
        fixed = max((demo_cpu_s - large_cpu_s_per_unit * demo_units) / demo_jobs, startup_cpu_s)
        return {"fixed_cpu_s": fixed, "cpu_s_per_unit": large_cpu_s_per_unit}
    net = max(demo_cpu_s - startup_cpu_s * demo_jobs, 0.1 * demo_cpu_s)
    return {"fixed_cpu_s": startup_cpu_s, "cpu_s_per_unit": net / demo_units if demo_units else 0.0}


def forest(rates: dict, rows: int, leaf: int) -> dict[str, Any]:
    """The measured forest nearest one of ``rows`` training rows (on a log scale) and ``leaf`` min_samples_leaf:
    its fit's CPU a tree and its map's CPU a pixel for 300 trees, both scaled to ``rows`` (a fit grows as
    n log n; a map as the trees' depth, log n)."""
    fits = [f for f in rates["forests"] if f["leaf"] == leaf] or rates["forests"]
    fit = min(fits, key=lambda f: abs(math.log(max(rows, 2) / f["rows"])))
    n, m = max(rows, 2), fit["rows"]
    return {
        **fit,
        "fit_cpu_s_per_tree_here": fit["fit_cpu_s_per_tree"]
        * n
        * math.log2(n)
        / (m * math.log2(m)),
        "map_cpu_s_per_px_300_here": fit["map_cpu_s_per_px_300_trees"]
        * math.log2(n)
        / math.log2(m),
    }
