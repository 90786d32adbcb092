"""The commands' help, read as a user reads it: no markup, no default where there is none, the networks'
shared parameters once."""

import re

import pytest

from lcflow.cli import main
from lcflow.train.models import hyperparameters


def _help(capsys, *args: str) -> str:
    with pytest.raises(SystemExit):
        from lcflow.cli import parser

        parser().parse_args([*args, "--help"])
    return capsys.readouterr().out


def test_help_has_no_markup_and_no_empty_defaults(capsys):
    from lcflow.cli import parser

    assert main(["--help"]) == 0
    top = capsys.readouterr().out
    assert "lcflow <stage>: every stage" in top
    for name in parser().parse_args(["check-config"]).commands:
        text = _help(capsys, name)
        assert "``" not in text and not re.search(r":[a-z]+:`", text), name
        assert "(default: None)" not in text and "(default: False)" not in text, name
    predict = _help(capsys, "predict")
    assert re.search(r"--out OUT +class map \(COG\) to write\n", predict)  # required: no default shown
    assert "(default: 256)" in predict


def test_train_help_lists_the_shared_training_parameters_once(capsys):
    text = _help(capsys, "train")
    for name in hyperparameters.TRAINING:
        again = (name in hyperparameters.RF) + (name in hyperparameters.PRESTO)  # the forest's own, presto's default
        assert len(re.findall(rf"^  {name} \(default", text, re.M)) == 1 + again, name
    assert len(text.splitlines()) < 120
    assert "README" not in text and "Slovenia" not in text  # measurements live in the docs
