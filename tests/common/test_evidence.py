"""The evidence rule: an accuracy figure is quoted only where at least MIN_POINTS points of at least MIN_CLASSES
reference classes back it."""

import numpy as np

from lcflow.common import evidence


def test_a_sample_of_one_class_or_too_few_points_backs_no_figure_at_the_edges_of_the_rule():
    n, k = evidence.MIN_POINTS, evidence.MIN_CLASSES
    assert (n, k) == (50, 2)
    one_class = [7] * 500
    assert evidence.shortfall(one_class) == f"500 points, of 1 class; an accuracy needs {evidence.RULE}"
    assert evidence.shortfall([1, 2] * (n // 2)) is None  # 50 points of 2 classes: just enough
    too_few = ([1, 2] * n)[: n - 1]
    assert evidence.shortfall(too_few, "rows") == f"{n - 1} rows, of 2 classes; an accuracy needs {evidence.RULE}"
    assert evidence.shortfall(np.array([], dtype=int)).startswith("0 points, of 0 classes")
