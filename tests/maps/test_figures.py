"""Figures for the report: a map's quicklook and a deep model's learning curve."""

import matplotlib.image
import numpy as np
import pytest

from lcflow.common.raster import Grid, write_cog
from lcflow.errors import LcflowError
from lcflow.maps import quicklook
from lcflow.train.model_dirs import learning_curve


def test_a_quicklook_shows_the_classes_in_their_colours_at_a_reduced_size(tmp_path):
    grid = Grid.from_bounds(32631, (600000, 5700000, 620000, 5720000), 10)  # 2000 x 2000 px
    classes = np.full((2000, 2000), 21, np.uint8)
    classes[:, 1000:] = 31
    classes[:100, :100] = 255
    colors = {21: (255, 255, 168), 31: (0, 166, 0)}
    write_cog(tmp_path / "m.tif", classes, grid, nodata=255, colors=colors,
              tags={"class_names": {"21": "Arable land", "31": "Forests"}})
    write_cog(tmp_path / "c.tif", np.full((2000, 2000), 80, np.uint8), grid, nodata=255)
    quicklook.write(tmp_path / "m.tif", tmp_path / "c.tif", tmp_path / "q.png", "m", max_px=256)
    image = matplotlib.image.imread(tmp_path / "q.png")[..., :3]
    pixels = {tuple(np.round(p * 255).astype(int)) for p in image.reshape(-1, 3)[::7]}
    assert (255, 255, 168) in pixels and (0, 166, 0) in pixels  # both classes drawn in their own colours
    data, _, _ = quicklook._reduced(tmp_path / "m.tif", 256, quicklook.Resampling.nearest)
    assert data.shape == (256, 256)


def test_a_learning_curve_marks_the_kept_round(tmp_path):
    rows = ["round,step,loss,accuracy,val_loss,val_accuracy,best_round"]
    rows += [f"{r},{10 * r},{1 / r},{1 - 1 / (r + 1)},{1 / r + 0.1},{0.9 - 0.01 * abs(r - 3)},{min(r, 3)}" for r in range(1, 7)]
    (tmp_path / "history.csv").write_text("\n".join(rows) + "\n")
    learning_curve.write(tmp_path / "history.csv", tmp_path / "lc.png", "lstm")
    assert matplotlib.image.imread(tmp_path / "lc.png").shape[1] > 500
    (tmp_path / "bad.csv").write_text("epoch,loss\n1,0.5\n")
    with pytest.raises(LcflowError, match="bad.csv is not a training history"):
        learning_curve.write(tmp_path / "bad.csv", tmp_path / "x.png", "lstm")
    assert not (tmp_path / "x.png").exists()


def test_class_names_are_shown_whole_and_colours_follow_the_data(tmp_path, monkeypatch):
    """Tick labels keep every word of a class's name (on several lines), the model comparison's dots say
    their tile-year, and its F1 colours span the values' own range."""
    import matplotlib.axes
    import numpy as np

    from lcflow.assess import accuracy_figures, comparison_figure
    from lcflow.common.figure_text import wrapped

    name = "121 Industrial, commercial and transport units"
    assert wrapped(name).split() == name.split() and max(map(len, wrapped(name).splitlines())) <= 22
    assert comparison_figure.tile_year("31UFT_2018_lstm") == "31UFT 2018"
    low, high = comparison_figure.color_range(np.array([[0.95, 0.99], [np.nan, 0.97]]))
    assert 0.94 <= low < 0.95 and 0.99 < high <= 1.0

    seen = []
    real = matplotlib.axes.Axes.set_xticks
    monkeypatch.setattr(matplotlib.axes.Axes, "set_xticks",
                        lambda self, ticks, labels=None, **kw: (seen.extend(labels or []), real(self, ticks, labels, **kw))[1])
    score = {"confusion_matrix": {"labels": [12, 31], "matrix": [[5, 1], [0, 7]]}, "overall_accuracy": 0.92,
             "kappa": 0.84, "per_class": {"12": {"name": "Industrial, commercial and transport units"},
                                          "31": {"name": "Forests"}}}
    accuracy_figures.confusion_figure(score, tmp_path / "c.png", "31UFT 2018")
    assert seen == ["12 Industrial,\ncommercial and\ntransport units", "31 Forests"]
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
