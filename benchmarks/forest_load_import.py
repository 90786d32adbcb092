"""CPU seconds a process spends importing what loading a forest's weights needs: skops.io as published
(whose default trust list imports every scikit-learn estimator) against lcflow's import of it without
that list (lcflow.train.models.rf._skops_io), side by side in fresh processes, turns interleaved; each
process imports scikit-learn's forest first, as a map or assessment job has by then. Medians."""

import argparse
import statistics
import sys

from shared import run_cpu_s

BASE = "import sklearn.ensemble, sklearn.metrics"
WAYS = {"skops.io as published": f"{BASE}; import skops.io",
        "lcflow's import": f"{BASE}; from lcflow.train.models import rf; rf._skops_io()",
        "neither (scikit-learn's forest alone)": f"{BASE}; from lcflow.train.models import rf"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=5, help="processes of each way (the median is printed)")
    turns = ap.parse_args().turns
    spent = {name: [] for name in WAYS}
    for _ in range(turns):
        for name, code in WAYS.items():
            spent[name].append(run_cpu_s([sys.executable, "-c", code])[1])
    base = statistics.median(spent["neither (scikit-learn's forest alone)"])
    for name, values in spent.items():
        m = statistics.median(values)
        print(f"{name:40s} {m:5.2f} CPU s (median of {len(values)}), {m - base:+5.2f} over the forest alone")
    ratio = (statistics.median(spent["skops.io as published"]) - base) / max(
        statistics.median(spent["lcflow's import"]) - base, 1e-3)
    print(f"skops.io's import costs {ratio:.1f} times as much CPU as published than as lcflow imports it")


if __name__ == "__main__":
    main()
