"""Change maps' codes (lcflow.maps.change): one code for each ordered pair of classes."""

import numpy as np
import pytest

from lcflow.errors import LcflowError
from lcflow.maps import change


def test_change_codes_name_every_ordered_pair():
    table = change.change_table([21, 31, 32], {21: "Arable", 31: "Forests", 32: "Scrub"}, {32: (1, 2, 3)})
    assert len(table) == 1 + 3 * 2 and table[0]["name"] == "no change"
    by_code = {r["code"]: r for r in table}
    assert by_code[1 + 1 * 3 + 2]["name"] == "Forests -> Scrub" and by_code[1 + 1 * 3 + 2]["color"] == [1, 2, 3]
    before, after = np.array([0, 1, 1, 2]), np.array([0, 2, 1, 0])
    codes = change.change_map(before, after, np.array([True, True, True, False]), 3)
    assert codes.tolist() == [0, 6, 0, change.CHANGE_NODATA]
    with pytest.raises(LcflowError, match="too many from-to pairs"):
        change.change_codes(256)
