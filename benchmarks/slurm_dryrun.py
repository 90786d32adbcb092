"""Dry-run time of the seed study's DAG under the Slurm profile: 10 Dutch MGRS tiles x 2018-2020,
four models (rf, lstm, tempcnn, resnet). Target: well under 5 s.

The DAG is built from a generated configuration of that size (a STAC API, a CORINE raster, no demo)
and ``snakemake -n --profile profiles/slurm`` is timed end to end, median of 3; the local profile is
timed beside it for the ratio.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.corine_cover import corine_over  # noqa: E402

TILES = ["31UET", "31UEU", "31UFS", "31UFT", "31UFU", "31UFV", "31UGT", "31UGU", "31UGV", "32ULE"]
SITE = {"LCFLOW_SLURM_STATUS_COMMAND": "squeue"}  # no Slurm needed for a dry run


def config(directory: Path) -> Path:
    corine_over(TILES, directory / "corine" / "clc_like_3035.tif")  # what the config checks ask: it covers every tile
    cfg = {
        "results": str(directory / "results"), "tiles": TILES, "years": [2018, 2019, 2020],
        "stac": {"api": "https://earth-search.aws.element84.com/v1", "collection": "sentinel-2-l2a"},
        "labels": {"corine": str(directory / "corine" / "clc_like_3035.tif"), "level": 2},
        "sample": {"patch_px": 11}, "models": ["rf", "lstm", "tempcnn", "resnet"],
    }
    path = directory / "netherlands_like.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def dry_run(directory: Path, configfile: Path, profile: str) -> tuple[float, int]:
    env = {**os.environ, **SITE, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    cmd = ["snakemake", "-n", "-s", str(ROOT / "Snakefile"), "-d", str(directory), "--profile",
           str(ROOT / "profiles" / profile), "--configfile", str(configfile)]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"dry run failed:\n{done.stderr[-3000:]}")
    jobs = int(next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("total")))
    return elapsed, jobs


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        configfile = config(tmp)
        times = {"slurm": [], "local": []}
        for _ in range(3):
            for profile in times:
                elapsed, jobs = dry_run(tmp, configfile, profile)
                times[profile].append(elapsed)
        slurm, local = statistics.median(times["slurm"]), statistics.median(times["local"])
        print(f"DAG: {len(TILES)} tiles x 3 years x 4 models = {jobs} jobs")
        print(f"dry run, profiles/slurm: {slurm:.2f} s (median of 3; runs {', '.join(f'{t:.2f}' for t in times['slurm'])})")
        print(f"dry run, profiles/local: {local:.2f} s; slurm/local {slurm / local:.2f}")
        print(f"target < 5 s: {'met' if slurm < 5 else 'NOT met'}")


if __name__ == "__main__":
    main()
