"""``lcflow <stage>``: every stage of the workflow as a command, the same on a laptop, in a test, in a Slurm job.

Errors end a command with one line naming what failed (file, item, tile, column, parameter) and a
non-zero exit: 2 for bad input, 1 for anything unexpected. The traceback goes to the log at debug
level (``-v``), which is how the workflow's rules run every command.
"""

import argparse
import contextlib
import logging
import signal
import sys
from pathlib import Path

from lcflow import config, job_resources, report_file
from lcflow.assess import commands as assess_commands
from lcflow.budget import commands as budget_commands
from lcflow.common import path_guard, rank_usage, termination, writer_wait
from lcflow.errors import LcflowError
from lcflow.labels import commands as labels_commands
from lcflow.maps import commands as maps_commands
from lcflow.retrieve import commands as retrieve_commands
from lcflow.synth import commands as synth_commands
from lcflow.train import commands as train_commands
from lcflow.tune import commands as tune_commands

log = logging.getLogger("lcflow")

BAD_INPUT, FAILED = 2, 1

#: each stage's commands, in the order of the workflow
STAGES = (
    synth_commands,
    retrieve_commands,
    labels_commands,
    train_commands,
    tune_commands,
    maps_commands,
    assess_commands,
    job_resources,
    report_file,
    config,
    budget_commands,
)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other error of lcflow."""

    def error(self, message: str):
        self.exit(BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _Help(argparse.RawDescriptionHelpFormatter):
    """A default shown after each option that has one (not after a required option, a flag or an unset
    one); descriptions and epilogs keep their line breaks and lose reStructuredText's markup."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "%(default)" in text
            or action.required
            or action.default in (None, False, argparse.SUPPRESS)
        ):
            return text
        if action.option_strings and action.nargs != 0:
            return f"{text} (default: %(default)s)"
        return text

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain(text))


def plain(text: str) -> str:
    """``text`` without reStructuredText's inline markup: ``code`` and :role:`target` as plain words."""
    import re

    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    return text.replace("``", "")


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="lcflow", description=__doc__, formatter_class=_Help)
    ap.add_argument(
        "-v", "--verbose", action="store_true", help="debug messages, and the traceback of an error"
    )
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")

    def command(name: str, help: str, **kw) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, formatter_class=_Help, **kw)

    ap.set_defaults(commands=sub.choices)

    for stage in STAGES:
        stage.register(command)
    return ap


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _guarded(args: argparse.Namespace) -> None:
    """Run the command once its paths are checked (no output may destroy an input), holding the writer
    lock of every output it declares (rank 0 of a parallel job: the ranks name the same outputs)."""
    paths = path_guard.declared(args.commands[args.command], args)
    path_guard.check(paths)
    local = [named for named in paths if not path_guard.is_remote(named.path)]
    outputs = [Path(named.path) for named in local if named.role.output]
    inputs = [Path(named.path) for named in local if not named.role.output]
    with contextlib.ExitStack() as held:
        # another live writer of an output (a stopped controller's job) is waited for (writer_wait)
        if path_guard.world_size() > 1:
            writer_wait.defer(
                outputs, inputs, held
            )  # rank 0 takes them once the ranks are connected
        elif path_guard.this_rank() == 0 and writer_wait.hold(outputs, inputs, held):
            return
        args.func(args)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already written in one line
        return exc.code if isinstance(exc.code, int) else BAD_INPUT
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    log.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    # Ctrl-C: what it stopped is unwound (staging gone, nothing published)
    try:
        # each rank's own usage written at exit where its launcher asks (lcflow.common.rank_usage)
        with rank_usage.recorded(args.command), termination.ended_by_sigterm(args.command):
            _guarded(args)  # SIGTERM unwinds like an error: staging files go
    except writer_wait.Made:
        return 0
    except LcflowError as exc:
        log.debug("%s failed", args.command, exc_info=True)
        print(f"lcflow {args.command}: error: {_one_line(str(exc))}", file=sys.stderr)
        return BAD_INPUT
    except KeyboardInterrupt:
        print(
            f"lcflow {args.command}: stopped by SIGINT{termination.rank_named()}: nothing was published; run it again to "
            "finish",
            file=sys.stderr,
        )
        return 128 + signal.SIGINT
    except SystemExit as exc:
        # lcflow.common.termination: scancel, a time limit, Snakemake
        if exc.code == 128 + signal.SIGTERM:
            print(
                f"lcflow {args.command}: error: stopped by SIGTERM{termination.rank_named()} (a cancelled job or its time "
                "limit): nothing was published",
                file=sys.stderr,
            )
        raise
    except Exception as exc:  # a library's error: one line here, the traceback in the log (-v)
        log.debug("%s failed", args.command, exc_info=True)
        hint = "" if args.verbose else " (run with -v for the traceback)"
        print(
            f"lcflow {args.command}: error: {type(exc).__name__}: {_one_line(str(exc))[:500]}{hint}",
            file=sys.stderr,
        )
        return FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
