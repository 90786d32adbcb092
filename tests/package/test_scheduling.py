"""How the suite shares CI's cores: the worker that runs the demo DAG makes its sibling workers step back."""

import os
import subprocess
import sys

from ..conftest import ROOT, YIELD_NICENESS

#: a parent with two children, as pytest-xdist's workers are: the first calls others_yield, the second
#: sleeps; the parent prints the second's niceness and its own, before and after
SCRIPT = """
import os, subprocess, sys, time
sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
before = os.getpriority(os.PRIO_PROCESS, sibling.pid)
worker = subprocess.run([sys.executable, "-c", "from tests.conftest import others_yield; others_yield()"],
                        env={**os.environ, "PYTEST_XDIST_WORKER": "gw0"}, capture_output=True, text=True)
print(before, os.getpriority(os.PRIO_PROCESS, sibling.pid), os.getpriority(os.PRIO_PROCESS, 0), worker.returncode)
sibling.kill()
"""


def test_the_demo_worker_lowers_its_sibling_workers_priority_not_its_parents():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    before, after, parent, worker = map(int, done.stdout.split())
    assert worker == 0
    assert after == min(19, before + YIELD_NICENESS) and after > before or before == 19, (before, after)
    assert parent == os.getpriority(os.PRIO_PROCESS, 0)  # the parent (pytest's main process) is left as it was
