"""Run the benchmarks ``make bench`` tracks: every script at this folder's top, each printing its own
ratios. The one-off studies in ``studies/`` (recipes, priors, Presto) run one by one, as
docs/benchmarks.md says; ``shared.py`` holds what the scripts share."""

import subprocess
import sys
from pathlib import Path

here = Path(__file__).parent
failed = 0
for script in sorted(here.glob("*.py")):
    if script.name in ("run.py", "shared.py") or script.name.startswith("_"):
        continue
    print(f"== {script.stem}", flush=True)
    failed += subprocess.run([sys.executable, str(script)]).returncode != 0
sys.exit(1 if failed else 0)
