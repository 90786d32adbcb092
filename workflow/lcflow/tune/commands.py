"""``lcflow tune`` (one worker of a study) and ``lcflow tune-summary``."""

import logging

from lcflow.common import cli_args, path_guard
from lcflow.train.commands import backend_of, backend_option
from lcflow.train.models import REGISTRY
from lcflow.tune import study_files
from lcflow.tune.hpo_settings import HpoSettings

log = logging.getLogger("lcflow")

#: a study directory: its workers' files are inputs, outputs (a worker's summary, best_params.yaml) may sit beside
study_dir = path_guard.role(
    path_guard.Role(output=False, directory=True, reads=study_files.MEMBERS)
)


def _tune_epilog() -> str:
    from lcflow.tune import space as search_space

    lines = ["default search spaces (--space replaces the model's):"]
    for model, space in search_space.DEFAULT_SPACES.items():
        lines.append(
            f"{model}: " + "; ".join(d.describe() for d in search_space.parse(model, space))
        )
    return "\n".join(lines)


def cmd_tune(a):
    import dataclasses
    import os
    import socket

    from lcflow.train.models import hyperparameters
    from lcflow.tune import space as search_space
    from lcflow.tune import tuning

    base = {
        **hyperparameters.parse_params(a.params),
        **hyperparameters.parse_overrides(a.set or []),
    }
    settings = HpoSettings.from_options(a)
    space = _space_file(a.space, a.model) if a.space else a.space_json
    # the tuned model's space, over the config's; checked here to be named as given
    if space is not None:
        search_space.parse(a.model, space, where="--space")
        settings = dataclasses.replace(settings, space={**settings.space, a.model: space})
    summary = tuning.tune(
        a.model,
        a.samples,
        a.study,
        settings,
        base=base,
        worker=a.worker or f"{socket.gethostname()}-{os.getpid()}",
        out=a.out,
        backend=backend_of(a),
    )
    if summary:
        log.info(
            "worker %s: %d trial(s) run; study %s: %s; best %.4f",
            summary["worker"],
            len(summary["trials"]),
            summary["study"],
            summary["study_trials"],
            summary["best_value"],
        )


def _space_file(path: str, model: str) -> dict:
    """A search space file: ``{param: range}`` for the model, or ``{model: {param: range}}``."""
    from lcflow.common.yaml_files import load_file

    data = load_file(path, "search space file")
    if model in data and isinstance(data[model], dict):
        return data[model]
    return data


def cmd_tune_summary(a):
    from lcflow.tune import study_summary

    best = study_summary.summarize(
        a.study, a.out, storage_url=a.storage, figures=not a.no_figures, model=a.model
    )
    log.info("best trial %d: %.4f %s -> %s", best["trial"], best["value"], best["params"], a.out)


def _summary_outputs(a) -> list[path_guard.Named]:
    """What tune-summary writes beside --out: the trials table and, unless --no-figures, the figures."""
    from pathlib import Path

    from lcflow.tune.study_summary import FIGURES, TRIALS_FILE

    names = [TRIALS_FILE] + ([] if a.no_figures else list(FIGURES.values()))
    return [
        path_guard.Named(f"--out's {name}", str(Path(a.out).parent / name), path_guard.OUTPUT_FILE)
        for name in names
    ]


def register(command) -> None:
    """Add this stage's commands; ``command(name, help, **kw)`` makes one sub-parser."""
    p = command(
        "tune",
        "one worker of a hyperparameter study (start several on one --study to share it)",
        epilog=_tune_epilog(),
    )
    p.add_argument("--model", required=True, choices=list(REGISTRY), help="model to tune")
    p.add_argument(
        "--samples",
        required=True,
        nargs="+",
        type=path_guard.input_file,
        help="samples table(s), parquet; val rows are carved from train where there are none",
    )
    p.add_argument(
        "--study",
        required=True,
        type=study_dir,
        help="study directory (journal, heartbeats); shared by the workers",
    )
    p.add_argument(
        "--space",
        type=path_guard.input_file,
        help="search space YAML: {param: {low, high[, log, step]} or "
        "{choices: [...]}} (default: the model's space in --settings' hpo.space, else the model's own, below)",
    )
    p.add_argument(
        "--space-json",
        type=cli_args.json_object,
        help="the search space as a JSON object, instead of --space",
    )
    p.add_argument("--params", help="fixed model parameters as a JSON object")
    p.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="a fixed model parameter, over --params"
    )
    p.add_argument(
        "--worker",
        type=cli_args.worker_id,
        help="this worker's id, recorded in each trial (default: host-pid); a worker "
        "restarted with the same id marks its own abandoned trial failed at once",
    )
    p.add_argument(
        "--out", type=path_guard.output_file, help="this worker's summary (JSON) to write"
    )
    backend_option(p)
    HpoSettings.add_options(p)
    p.set_defaults(func=cmd_tune)

    p = command("tune-summary", "best parameters, every trial and figures of a study")
    p.add_argument(
        "--model",
        choices=list(REGISTRY),
        help="the model whose study to summarise, where the "
        "storage holds several (default: the latest study)",
    )
    p.add_argument(
        "--study", required=True, type=study_dir, help="study directory written by lcflow tune"
    )
    p.add_argument("--storage", help="RDB URL the study was run on, if not the journal file")
    p.add_argument(
        "--out",
        required=True,
        type=path_guard.output_file,
        help="best parameters (YAML) to write; trials.csv and the figures go beside it",
    )
    p.add_argument("--no-figures", action="store_true", help="skip the figures")
    p.set_defaults(func=cmd_tune_summary, implied_paths=_summary_outputs)
