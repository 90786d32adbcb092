"""The memory a forest's fit takes: what ``lcflow budget`` projects for ``train rf`` and warns about where a
job would need more than a node holds.

Table: every labelled pixel of the demo's tile-years outside their test blocks (forest_size.py's table),
prepared as lcflow prepares a forest's input: ``(rows, steps, bands + 1)`` float32. For each ``--rows``,
``--leaf`` (min_samples_leaf) and ``--jobs`` (threads), lcflow's forest (its defaults otherwise, out-of-bag
score included) is fitted in a fresh process that first loads the rows it needs, then fits: the run prints
the process's resident memory before the fit, its peak (``VmHWM``), the input's bytes and the fitted
forest's (its node records and class rows, as ``metrics.json``'s ``size.held_mb``).

What the fit adds above the loaded input is then fitted by least squares as
``fixed + per_held x held bytes + per_row x rows + per_row_thread x rows x threads``: the trees kept, the
out-of-bag tallies, each thread's tree under construction and its buffers (measured at 1 and 2 threads here:
a node of 48 cores is an extrapolation). ``--rates`` writes those figures, with the bytes a node takes, into the
package's rates.json (``forest_memory``), which ``lcflow budget`` reads.

Usage: python benchmarks/forest_fit_memory.py [--rows 25000,50000,100000,190000] [--leaf 1,30] [--jobs 1,2]
       [--trees 30] [--work DIR] [--json FILE] [--rates] [--from-json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RATES = ROOT / "workflow" / "lcflow" / "budget" / "rates.json"


def _status_mb(field: str) -> float:
    """A memory figure of this process from /proc (VmRSS: now; VmHWM: its peak), in MB. Not ``ru_maxrss``,
    which keeps the forked parent's peak across the exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024 / 1e6
    raise SystemExit(f"/proc/self/status has no {field}")


def child(table: Path, rows: int, leaf: int, jobs: int, trees: int) -> None:
    """Load ``rows`` rows of ``table`` and fit lcflow's forest on them; print one JSON line of figures."""
    from lcflow.train.models import model_class

    x = np.array(np.load(table / "x.npy", mmap_mode="r")[:rows])
    y = np.array(np.load(table / "y.npy", mmap_mode="r")[:rows])
    classes = int(y.max()) + 1
    before = _status_mb("VmRSS")
    params = {"n_estimators": trees, "min_samples_leaf": leaf, "n_jobs": jobs}
    model = model_class("rf")(params, x.shape[2], x.shape[1], classes)
    model.fit(x, y, None, None)
    size = model.size()
    peak = _status_mb("VmHWM")
    print(json.dumps({"rows": rows, "leaf": leaf, "jobs": jobs, "trees": trees,
                      "features": int(x.shape[1] * x.shape[2]), "classes": classes, "input_mb": x.nbytes / 1e6,
                      "before_mb": before, "peak_mb": peak, "nodes": size["nodes"],
                      "held_mb": size["held_mb"]}))


def table(work: Path, years: tuple[int, ...], side: int) -> Path:
    """The prepared training rows of the demo's tile-years (outside the test blocks), shuffled, saved."""
    from shared import demo_pixels

    from lcflow.common.features import Standardiser, prepare

    out = work / f"forest_rows_{side}_{'-'.join(map(str, years))}"
    if (out / "y.npy").exists():
        return out
    series, label, _truth, test, _ = demo_pixels(work, years, side)
    pool = np.random.default_rng(0).permutation(np.flatnonzero(~test))
    index = np.searchsorted(np.unique(label[pool]), label[pool])
    x = prepare(series[pool], Standardiser.fit(series[pool]))[0]
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "x.npy", x)
    np.save(out / "y.npy", index.astype(np.int64))
    return out


def least_squares(fits: list[dict]) -> dict:
    """``fixed_mb + per_held x held + per_row x rows + per_row_thread x rows x jobs`` fitted to what each fit
    added above its loaded input; with each fit's modelled figure."""
    a = np.array([[1.0, f["held_mb"], f["rows"] / 1e6, f["rows"] * f["jobs"] / 1e6] for f in fits])
    b = np.array([f["peak_mb"] - f["before_mb"] for f in fits])
    (fixed, per_held, per_row, per_row_thread), *_ = np.linalg.lstsq(a, b, rcond=None)
    for f, got in zip(fits, a @ [fixed, per_held, per_row, per_row_thread]):
        f["modelled_mb"] = float(got)
    trees = fits[0]["trees"]
    return {"fixed_mb": float(fixed), "per_held_byte": float(per_held), "bytes_per_row": float(per_row),
            "bytes_per_row_thread": float(per_row_thread),
            "bytes_per_node": float(sum(f["held_mb"] for f in fits) * 1e6 / sum(f["nodes"] for f in fits)),
            "classes": fits[0]["classes"],
            "before_fit_mb": float(np.median([f["before_mb"] - f["input_mb"] for f in fits])),
            # the nodes of each leaf size's forest on the most rows, a row a tree
            "nodes_per_row_tree": {str(leaf): (most := max((f for f in fits if f["leaf"] == leaf),
                                                           key=lambda f: f["rows"]))["nodes"] / (most["rows"] * trees)
                                   for leaf in sorted({f["leaf"] for f in fits})},
            "threads_measured": sorted({f["jobs"] for f in fits})}


def said(fit: dict) -> str:
    return (f"rows {fit['rows']:7d} leaf {fit['leaf']:3d} threads {fit['jobs']}: input {fit['input_mb']:7.1f} MB "
            f"({fit['features']} features), before the fit {fit['before_mb']:7.1f} MB, peak "
            f"{fit['peak_mb']:7.1f} MB; forest {fit['nodes']:8d} nodes, {fit['held_mb']:7.1f} MB held")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="25000,50000,100000,190000")
    ap.add_argument("--leaf", default="1,30")
    ap.add_argument("--jobs", default="1,2")
    ap.add_argument("--trees", type=int, default=30)
    ap.add_argument("--side", type=int, default=256, help="the demo's tiles, px a side")
    ap.add_argument("--years", default="2018,2019")
    ap.add_argument("--work", type=Path, help="folder for the demo's tiles (default: a temporary one)")
    ap.add_argument("--json", type=Path, help="also write every fit's figures to this file")
    ap.add_argument("--rates", action="store_true", help="write the fitted figures into rates.json")
    ap.add_argument("--from-json", type=Path, help="fit the figures of an earlier run's --json instead of fitting anew")
    ap.add_argument("--child", nargs=5, metavar=("TABLE", "ROWS", "LEAF", "JOBS", "TREES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.from_json:
        fits = json.loads(args.from_json.read_text())["fits"]
        for fit in fits:
            print(said(fit))
        _report(fits, args)
        return
    if args.child:
        t, *numbers = args.child
        child(Path(t), *(int(n) for n in numbers))
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        rows_file = table(work, tuple(int(y) for y in args.years.split(",")), args.side)
        have = len(np.load(rows_file / "y.npy", mmap_mode="r"))
        fits = []
        for rows in (int(r) for r in args.rows.split(",")):
            if rows > have:
                raise SystemExit(f"--rows {rows}: the table has {have} rows (--side larger)")
            for leaf in (int(v) for v in args.leaf.split(",")):
                for jobs in (int(j) for j in args.jobs.split(",")):
                    got = subprocess.run([sys.executable, __file__, "--child", str(rows_file), str(rows), str(leaf),
                                          str(jobs), str(args.trees)], check=True, capture_output=True, text=True)
                    fit = json.loads(got.stdout.strip().splitlines()[-1])
                    fits.append(fit)
                    print(said(fit), flush=True)
    _report(fits, args)


def _report(fits: list[dict], args: argparse.Namespace) -> None:
    """The fitted figures, each fit against them; the JSON and the rates where asked."""
    model = least_squares(fits)
    print(f"\nthe fit adds {model['fixed_mb']:.1f} MB + {model['per_held_byte']:.2f} x the forest held + "
          f"{model['bytes_per_row']:.0f} B a row + {model['bytes_per_row_thread']:.0f} B a row a thread above its "
          f"loaded input; a node {model['bytes_per_node']:.0f} B held at {model['classes']} classes; a process holds "
          f"{model['before_fit_mb']:.0f} MB beside its input")
    for f in fits:
        print(f"  rows {f['rows']:7d} leaf {f['leaf']:3d} threads {f['jobs']}: added "
              f"{f['peak_mb'] - f['before_mb']:7.1f} MB, modelled {f['modelled_mb']:7.1f} MB")
    if args.json:
        args.json.write_text(json.dumps({"fits": fits, "model": model}, indent=1) + "\n")
    if args.rates:
        rates = json.loads(RATES.read_text())
        rates["forest_memory"] = {**model, "source": "benchmarks/forest_fit_memory.py "
                                  "(benchmarks/measured/forest_fit_memory_2core.txt)"}
        RATES.write_text(json.dumps(rates, indent=1) + "\n")


if __name__ == "__main__":
    main()
