"""Whether two runs of the workflow made the same products: two results folders compared by what their
files hold, not by their bytes, so that a refactor can show it changed no map, table or model.

Rasters (GeoTIFF) are compared by pixels, CRS, transform and band count (not by compression or tags);
tables (parquet, TSV, CSV) by their values; JSON by its values. Columns and keys that belong to the run
rather than to a product are left out: times, rates, process ids, hosts, memory, hrefs (where the
files lie) and the checksums of serialised weights (skops names its arrays by object id, torch names its
archive's folder after the staging file, so equal weights hash differently: the models are compared
through the maps they make). So are the
``benchmarks/`` and ``logs/`` folders, ``job_resources.tsv`` and anything that is not a raster, table or
JSON (figures, the report, geopackages). Columns and keys that only one side has, and files that only
one side has, are new products, not changed ones: files are listed apart. Exit status 1 when a file both
sides have differs.

    python -m tests.compare_results OLD_RESULTS NEW_RESULTS   (from the repository root)
"""

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import rasterio

# a column or key named so belongs to the run (a measurement, a place, a file's checksum), not to a product
RUN_SPECIFIC = re.compile(r"(^|_)(s|seconds|time|duration|datetime.*|px_s|pid|host|rss.*|mb|elapsed|rate|href"
                          r"|sha256)$", re.IGNORECASE)
SKIPPED_FOLDERS = {"benchmarks", "logs", ".snakemake"}
SKIPPED_FILES = {"job_resources.tsv"}

def products(root: Path) -> set[Path]:
    """The files under ``root`` that are compared, relative to it."""
    found = set()
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if (path.is_file() and path.suffix in SAME and relative.parts[0] not in SKIPPED_FOLDERS
                and relative.name not in SKIPPED_FILES):
            found.add(relative)
    return found


def same_raster(a: Path, b: Path) -> bool:
    with rasterio.open(a) as x, rasterio.open(b) as y:
        return (x.crs == y.crs and x.transform == y.transform and x.count == y.count
                and np.array_equal(x.read(), y.read(), equal_nan=True))


def _table(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
    else:
        frame = pd.read_csv(path, sep="\t" if path.suffix == ".tsv" else ",")
    return frame[[c for c in frame.columns if not RUN_SPECIFIC.search(str(c))]]


def same_table(a: Path, b: Path) -> bool:
    """Equal on the columns both tables have; a column added or removed is a new product, not a change."""
    x, y = _table(a), _table(b)
    shared = [c for c in x.columns if c in y.columns]
    return len(x) == len(y) and x[shared].reset_index(drop=True).equals(y[shared].reset_index(drop=True))


def _same_values(x, y) -> bool:
    """Equal on the keys both have, at every depth, run-specific keys left out."""
    if isinstance(x, dict) and isinstance(y, dict):
        return all(_same_values(x[k], y[k]) for k in x.keys() & y.keys() if not RUN_SPECIFIC.search(str(k)))
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_same_values(a, b) for a, b in zip(x, y))
    return x == y


def same_json(a: Path, b: Path) -> bool:
    return _same_values(json.loads(a.read_text()), json.loads(b.read_text()))


SAME = {".tif": same_raster, ".parquet": same_table, ".tsv": same_table, ".csv": same_table, ".json": same_json}


def compare(old: Path, new: Path) -> dict[str, list[str]]:
    """The compared files by outcome: identical, different, only in old, only in new."""
    a, b = products(old), products(new)
    outcome: dict[str, list[str]] = {"identical": [], "different": [], "only_old": [], "only_new": []}
    for relative in sorted(a & b):
        same = SAME[relative.suffix](old / relative, new / relative)
        outcome["identical" if same else "different"].append(relative.as_posix())
    outcome["only_old"] = sorted(p.as_posix() for p in a - b)
    outcome["only_new"] = sorted(p.as_posix() for p in b - a)
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path, help="results folder of the earlier run")
    parser.add_argument("new", type=Path, help="results folder of the later run")
    args = parser.parse_args(argv)
    for root in (args.old, args.new):
        if not root.is_dir():
            parser.error(f"{root} is not a folder")
    outcome = compare(args.old, args.new)
    print(f"{len(outcome['identical']) + len(outcome['different'])} products both have: "
          f"{len(outcome['identical'])} identical, {len(outcome['different'])} different; "
          f"{len(outcome['only_old'])} only in {args.old}, {len(outcome['only_new'])} only in {args.new}")
    for label, key in (("different", "different"), ("only old", "only_old"), ("only new", "only_new")):
        for name in outcome[key]:
            print(f"{label}: {name}")
    return 1 if outcome["different"] else 0


if __name__ == "__main__":
    sys.exit(main())
