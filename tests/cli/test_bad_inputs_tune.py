"""The bad-input catalogue's cases of tune and tune-summary (tests/cli/bad_input_catalogue.py)."""

import pytest

from .bad_input_catalogue import cases_of, check_case

CASES = cases_of("tune")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_ends_in_one_line(case, demo, stages, tmp_path, capsys):
    check_case(case, demo, stages, tmp_path, capsys)
