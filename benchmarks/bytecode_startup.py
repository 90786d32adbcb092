"""What compiling lcflow's own modules ahead (``make setup``: ``python -m compileall workflow/lcflow``) saves
each lcflow process where ``PYTHONDONTWRITEBYTECODE`` is set (as on CI), so that nothing compiled at run time
is kept: two copies of the package, one without byte-code and one compiled, run the same commands in turns
(``lcflow check-config`` on the demo's config, ``lcflow quicklook`` of a map when ``--map`` is given); CPU
seconds of each, mean of the turns.

    python benchmarks/bytecode_startup.py [--turns 5] [--map MAP.tif --confidence CONF.tif]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_of(argv: list[str], package_root: Path) -> float:
    """CPU seconds (user and system) of one process running ``argv`` with lcflow from ``package_root``."""
    before = os.times()
    env = {**os.environ, "PYTHONPATH": str(package_root), "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run([sys.executable, "-m", "lcflow.cli", *argv], env=env, check=True, capture_output=True)
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--map", type=Path, help="a class map of lcflow predict, for a quicklook (a figure job)")
    ap.add_argument("--confidence", type=Path, help="its confidence map")
    args = ap.parse_args()
    commands = {"check-config": ["check-config", "--configfile", str(ROOT / "config" / "config.yaml")]}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.map:
            commands["quicklook"] = ["quicklook", "--map", str(args.map), "--confidence", str(args.confidence),
                                     "--out", str(tmp / "q.png")]
        copies = {}
        for name in ("source only", "compiled"):
            copies[name] = tmp / name.replace(" ", "_")
            shutil.copytree(ROOT / "workflow" / "lcflow", copies[name] / "lcflow",
                            ignore=shutil.ignore_patterns("*.pyc"))
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(copies["compiled"] / "lcflow")], check=True)
        spent = {(c, n): [] for c in commands for n in copies}
        for _ in range(args.turns):
            for command, argv in commands.items():
                for name, root in copies.items():
                    spent[(command, name)].append(cpu_of(argv, root))
    print(f"# {args.turns} turns, {len(os.sched_getaffinity(0))} cores; CPU s of one process, mean of the turns")
    for command in commands:
        plain, compiled = (sum(spent[(command, n)]) / args.turns for n in copies)
        print(f"lcflow {command:13s} source only {plain:.2f}  compiled {compiled:.2f}  saved {plain - compiled:.2f} "
              f"CPU s ({(plain - compiled) / plain:.0%})")


if __name__ == "__main__":
    main()
