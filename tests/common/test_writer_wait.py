"""Another live writer of a command's outputs (a stopped controller's job): waited for, within a bound, and
its complete outputs kept, nothing written over them; refused at once outside Slurm unless asked."""

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lcflow.common import writer_wait
from lcflow.common.atomic import lock_path
from lcflow.errors import LcflowError
from lcflow.train.parallel.distributed import Single

from ..conftest import ROOT

LCFLOW = Path(sys.executable).parent / "lcflow"

#: a writer of argv[1] that holds its lock for argv[2] seconds (or, given "stdin", until it reads a line),
#: then writes it (argv[3] == "write") or not
WRITER = """
import sys, time
from lcflow.common.atomic import writer_lock
with writer_lock(sys.argv[1]):
    print("holding", flush=True)
    if sys.argv[2] == "stdin":
        sys.stdin.readline()
    else:
        time.sleep(float(sys.argv[2]))
    if sys.argv[3] == "write":
        open(sys.argv[1], "w").write("the other writer's\\n")
"""


@contextlib.contextmanager
def other_writer(out: Path, seconds: float | str, write: bool):
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(out), str(seconds), "write" if write else "no"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "holding"
        yield child
    finally:
        child.kill()
        child.wait()


@pytest.fixture(autouse=True)
def quick_looks(monkeypatch):
    monkeypatch.setattr(writer_wait, "POLL_S", 0.2)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)


def test_a_finished_writer_s_complete_output_is_kept_and_nothing_is_written(tmp_path, monkeypatch, caplog):
    caplog.set_level("INFO", logger="lcflow")
    monkeypatch.setenv(writer_wait.WAIT_VARIABLE, "1")
    out, given = tmp_path / "out.json", tmp_path / "in.yaml"
    given.write_text("x: 1\n")
    with other_writer(out, 1.5, write=True), contextlib.ExitStack() as stack:
        started = time.monotonic()
        assert writer_wait.hold([out], [given], stack) is True
    assert time.monotonic() - started >= 1.0 and out.read_text() == "the other writer's\n"
    said = caplog.text
    assert "another process is writing" in said and "waiting for it, at most 1 min" in said
    assert "nothing to do, nothing written" in said


def test_a_writer_that_ends_without_its_output_leaves_the_making_to_the_waiter(tmp_path, monkeypatch):
    monkeypatch.setenv(writer_wait.WAIT_VARIABLE, "1")
    out = tmp_path / "out.json"
    with other_writer(out, 0.5, write=False), contextlib.ExitStack() as stack:
        assert writer_wait.hold([out], [], stack) is False
        assert lock_path(out).exists()  # the waiter holds the lock now


def test_an_output_older_than_an_input_is_made_again(tmp_path, monkeypatch):
    monkeypatch.setenv(writer_wait.WAIT_VARIABLE, "1")
    out, given = tmp_path / "out.json", tmp_path / "in.yaml"
    with other_writer(out, 0.5, write=True) as child, contextlib.ExitStack() as stack:
        child.wait()
        given.write_text("x: 2\n")  # changed after the other writer made its output
        os.utime(given, (time.time() + 5, time.time() + 5))
        assert writer_wait.hold([out], [given], stack) is False


def test_the_wait_is_bounded_and_outside_slurm_a_second_writer_is_refused_at_once(tmp_path, monkeypatch):
    out = tmp_path / "out.json"
    with other_writer(out, 30, write=True), contextlib.ExitStack() as stack:
        with pytest.raises(LcflowError, match="another process is writing .*out.json .*: wait for it"):
            writer_wait.hold([out], [], stack)
        monkeypatch.setenv(writer_wait.WAIT_VARIABLE, "0.02")
        started = time.monotonic()
        with pytest.raises(LcflowError, match=r"another process is writing .*out.json .* still after 0 min "
                                              rf"\({writer_wait.WAIT_VARIABLE}\)"):
            writer_wait.hold([out], [], stack)
        assert time.monotonic() - started < 10
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.delenv(writer_wait.WAIT_VARIABLE)
    assert writer_wait.bound_minutes() == writer_wait.MINUTES
    monkeypatch.setenv(writer_wait.WAIT_VARIABLE, "soon")
    with pytest.raises(LcflowError, match=rf"{writer_wait.WAIT_VARIABLE}='soon': not a number of minutes"):
        writer_wait.bound_minutes()


def test_ranks_learn_from_rank_0_that_the_outputs_were_made(tmp_path, monkeypatch):
    """settle, as connect() calls it once the ranks are connected (one rank here: the broadcast is the
    identity; the Slurm test kills a controller under a two-rank training)."""
    monkeypatch.setenv(writer_wait.WAIT_VARIABLE, "1")
    out = tmp_path / "model"
    with other_writer(out, 0.5, write=True), contextlib.ExitStack() as stack:
        writer_wait.defer([out], [], stack)
        with pytest.raises(writer_wait.Made):
            writer_wait.settle(Single())
    with contextlib.ExitStack() as stack:  # a free output: taken, and the command goes on
        writer_wait.defer([tmp_path / "other"], [], stack)
        writer_wait.settle(Single())
        assert lock_path(tmp_path / "other").exists()


def test_a_command_waited_out_ends_0_and_leaves_the_other_writer_s_output(tmp_path):
    """The real command line: lcflow budget's --json written by another writer while it waits."""
    out = tmp_path / "budget.json"
    env = {**os.environ, writer_wait.WAIT_VARIABLE: "1"}
    env.pop("SLURM_JOB_ID", None)
    with other_writer(out, "stdin", write=True) as writer:  # it holds until the command says it waits
        command = subprocess.Popen([str(LCFLOW), "budget", "--configfile", "config/config.yaml", "--profile",
                                    "local", "--json", str(out)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        said = []
        for line in command.stderr:
            said.append(line)
            if "waiting for it" in line:
                break
        writer.stdin.write("done\n")
        writer.stdin.flush()
        writer.wait(timeout=30)
        stdout, rest = command.communicate(timeout=120)
    done = subprocess.CompletedProcess(command.args, command.returncode, stdout, "".join(said) + rest)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "the other writer's\n" and "nothing to do, nothing written" in done.stderr
    assert done.stdout == ""  # the budget itself never ran
