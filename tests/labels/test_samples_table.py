import numpy as np
import pandas as pd
import pytest

from lcflow.errors import LcflowError
from lcflow.labels import samples_table as samples


def table(n=20, classes=(1, 2), bands=("B04", "B08"), steps=3):
    rng = np.random.default_rng(0)
    cols = {"label": np.resize(np.array(classes, dtype=np.int64), n)}
    for k in range(steps):
        for b in bands:
            cols[f"{b}_t{k:02d}"] = rng.normal(size=n)
    return pd.DataFrame(cols)


def test_layout_and_features():
    t = samples.check(table(), "t.parquet")
    assert t.bands == ["B04", "B08"] and t.steps == 3 and t.classes == [1, 2]
    f = t.features()
    assert f.shape == (20, 3, 2)
    assert f[0, 2, 1] == np.float32(t.frame["B08_t02"][0])


def test_nan_cells_are_normal_input():
    df = table()
    df.loc[3, "B04_t01"] = np.nan
    t = samples.check(df, "t.parquet")
    assert np.isnan(t.features()[3, 1, 0])


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d.drop(columns=["label"]), "no 'label' column"),
    (lambda d: d.drop(columns=["B08_t01"]), "missing band column.*B08_t01"),
    (lambda d: d.drop(columns=[c for c in d.columns if c != "label"]), "no band columns"),
    (lambda d: d.assign(label=1), "only 1 class"),
    (lambda d: d.assign(split="training"), "unknown split value.*training"),
    (lambda d: d.assign(label=d["label"].astype(float) + 0.5), "integer"),
    (lambda d: d.rename(columns={"B04_t00": "B13_t00"}), "unknown band"),
])
def test_bad_tables_are_refused(mutate, message):
    with pytest.raises(LcflowError, match=f"bad.parquet: .*{message}"):
        samples.check(mutate(table()), "bad.parquet")


def test_round_trip_with_metadata_and_several_tables(tmp_path):
    meta = {"time_steps": ["2018-01-16", "2018-05-17", "2018-09-16"], "class_names": {"1": "a", "2": "b"}}
    samples.write(table(), tmp_path / "a.parquet", meta)
    samples.write(table(classes=(2, 3)), tmp_path / "b.parquet", {"class_names": {"3": "c"}})
    one = samples.read(tmp_path / "a.parquet")
    assert one.meta["time_steps"] == meta["time_steps"] and one.class_names() == {1: "a", 2: "b"}
    both = samples.read([tmp_path / "a.parquet", tmp_path / "b.parquet"])
    assert len(both.frame) == 40 and both.classes == [1, 2, 3] and both.class_names()[3] == "c"
    with pytest.raises(LcflowError, match="does not exist"):
        samples.read(tmp_path / "none.parquet")
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(LcflowError, match="junk.parquet is not a readable parquet"):
        samples.read(tmp_path / "junk.parquet")
