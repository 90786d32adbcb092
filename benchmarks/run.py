"""Run every benchmark in this folder (``make bench``); each prints its own ratios."""

import subprocess
import sys
from pathlib import Path

here = Path(__file__).parent
failed = 0
for script in sorted(here.glob("*.py")):
    if script.name == "run.py" or script.name.startswith("_"):
        continue
    print(f"== {script.stem}", flush=True)
    failed += subprocess.run([sys.executable, str(script)]).returncode != 0
sys.exit(1 if failed else 0)
