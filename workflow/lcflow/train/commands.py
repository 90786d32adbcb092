"""``lcflow train``, ``lcflow evaluate`` and ``lcflow learning-curve``."""

import logging
from pathlib import Path

from lcflow.common import cli_args, path_guard
from lcflow.defaults import default
from lcflow.train.models import REGISTRY

log = logging.getLogger("lcflow")


def _model_epilog() -> str:
    from lcflow.train.models import hyperparameters

    return "model parameters (--set KEY=VALUE):\n" + hyperparameters.describe_all()


def cmd_train(a):
    from lcflow.train import training
    from lcflow.train.models import hyperparameters

    params = {
        **hyperparameters.parse_params(a.params),
        **hyperparameters.parse_overrides(a.set or []),
    }
    tuned = None
    if a.tuned:  # only then: lcflow.tune brings Optuna in
        from lcflow.train.models.hyperparameters import read_best

        tuned = read_best(a.tuned, a.model)
    metrics = training.train(a.model, a.samples, a.out, params, tuned=tuned, backend=backend_of(a))
    if not metrics:  # a rank other than 0: rank 0 reports
        return
    test = metrics.get("test")
    log.info(
        "%s trained -> %s%s",
        a.model,
        a.out,
        f"; agreement with the test rows' labels {test['overall_accuracy']:.4f} (kappa {test['kappa']:.4f}; "
        "the map's accuracy comes from a reference sample: lcflow assess)"
        if _scored(test)
        else "",
    )


def cmd_blend(a):
    from lcflow.train.model_dirs import blend

    metrics = blend.make(a.members, a.out, a.samples)
    test = metrics.get("test")
    log.info(
        "blend of %s -> %s%s",
        ", ".join(metrics["members"]),
        a.out,
        f"; test OA {test['overall_accuracy']:.4f}, kappa {test['kappa']:.4f}"
        if _scored(test)
        else "",
    )


def _scored(result: dict | None) -> bool:
    """A score with its figures: present and not withheld for want of evidence."""
    from lcflow.common import evidence

    return bool(result) and not evidence.lacking(result)


def cmd_evaluate(a):
    from lcflow.train.model_dirs import saved_models

    r = saved_models.evaluate(a.model_dir, a.samples, a.out)
    if not _scored(r):  # the warning said why
        log.info("no scores on %d samples (not enough evidence) -> %s", r["n_samples"], a.out)
        return
    log.info(
        "OA %.4f, kappa %.4f, macro F1 %.4f on %d samples -> %s",
        r["overall_accuracy"],
        r["kappa"],
        r["macro_f1"],
        r["n_samples"],
        a.out,
    )


def cmd_learning_curve(a):
    from lcflow.train.model_dirs import learning_curve

    learning_curve.write(a.history, a.out, a.title or Path(a.history).parent.name)
    log.info("learning curve -> %s", a.out)


def backend_option(parser) -> None:
    """``--backend`` and ``--rendezvous-minutes``: how the ranks of a parallel launch talk, and how long they
    wait for each other at start-up (train, tune and predict take them)."""
    from lcflow.train.parallel.distributed import BACKENDS

    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default=default("distributed.backend"),
        help="distributed backend when a launcher starts several ranks: horovod (horovodrun, "
        "srun --mpi=pmix) or torch (torchrun, srun)",
    )
    parser.add_argument(
        "--rendezvous-minutes",
        **cli_args.from_config("distributed.rendezvous_minutes"),
        help="how long a torch rank waits for the others at start-up before it ends the job",
    )


def backend_of(a) -> str:
    """The backend the command's ranks use, its rendezvous timeout set."""
    from lcflow.train.parallel import distributed

    distributed.configure(a.rendezvous_minutes)
    return a.backend


def register(command) -> None:
    """Add this stage's commands; ``command(name, help, **kw)`` makes one sub-parser."""
    _train_command(command)
    _blend_command(command)
    _evaluate_command(command)
    _learning_curve_command(command)


def _train_command(command) -> None:
    """``lcflow train``."""
    p = command("train", "train a model on samples table(s)", epilog=_model_epilog())
    p.add_argument("--model", required=True, choices=list(REGISTRY), help="model to train")
    p.add_argument(
        "--samples",
        required=True,
        nargs="+",
        type=path_guard.input_file,
        help="samples table(s), parquet",
    )
    p.add_argument("--out", required=True, type=path_guard.output_dir, help="model directory")
    p.add_argument(
        "--params", help="model parameters as a JSON object (as the workflow passes them)"
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="a model parameter, over --params (repeatable; the list is below)",
    )
    p.add_argument(
        "--tuned",
        type=path_guard.input_file,
        metavar="BEST_PARAMS_YAML",
        help="parameters found by lcflow tune-summary, over --params and --set; recorded in metrics.json",
    )
    backend_option(p)
    p.set_defaults(func=cmd_train)


def _blend_command(command) -> None:
    """``lcflow blend``."""
    p = command(
        "blend",
        "a model that averages the class probabilities of trained models (a forest and a network "
        "err on different pixels)",
    )
    p.add_argument(
        "--members",
        required=True,
        nargs="+",
        type=path_guard.input_dir,
        help="model directories written by lcflow train, trained on the same samples",
    )
    p.add_argument(
        "--samples",
        nargs="+",
        type=path_guard.input_file,
        help="samples table(s) the members trained on: the blend is scored on "
        "their val and test rows (metrics.json)",
    )
    p.add_argument(
        "--out", required=True, type=path_guard.output_dir, help="the blend's model directory"
    )
    p.set_defaults(func=cmd_blend)


def _evaluate_command(command) -> None:
    """``lcflow evaluate``."""
    p = command("evaluate", "score a trained model on samples table(s)")
    p.add_argument(
        "--model-dir",
        required=True,
        type=path_guard.input_dir,
        help="directory written by lcflow train or lcflow blend",
    )
    p.add_argument(
        "--samples",
        required=True,
        nargs="+",
        type=path_guard.input_file,
        help="samples table(s): the test rows, or all without a split",
    )
    p.add_argument(
        "--out", required=True, type=path_guard.output_file, help="metrics JSON to write"
    )
    p.set_defaults(func=cmd_evaluate)


def _learning_curve_command(command) -> None:
    """``lcflow learning-curve``."""
    p = command(
        "learning-curve", "loss and accuracy of a deep model's training, per round, as a PNG"
    )
    p.add_argument(
        "--history",
        required=True,
        type=path_guard.input_file,
        help="history.csv written by lcflow train",
    )
    p.add_argument("--title", default="", help="title of the figure")
    p.add_argument("--out", required=True, type=path_guard.output_file, help="PNG to write")
    p.set_defaults(func=cmd_learning_curve)
