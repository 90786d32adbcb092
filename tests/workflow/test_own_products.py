"""The whole workflow on a user's own products: monthly composites already masked (no SCL, nodata 65535, no
offset recorded), labelled polygons and reference points of the user's own codes (100/200, or 1/2). The cubes have
each month in its own step, and accuracy.tsv quotes the reference sample's overall accuracy with its interval."""

import json

import numpy as np
import pandas as pd
import pytest
import rasterio
import yaml

from ..composites import BANDS, write_composites
from ..config.test_own_nomenclature import own_labels
from ..conftest import SMALL_AOI, snakemake

pytestmark = pytest.mark.integration


def _labelled_points(demo, path, codes, n: int = 80, seed: int = 1):
    """``n`` random points of 31UFT's area labelled from the demo's truth of 2018 in the user's ``codes``
    (CORINE's forests the first, the rest the second), as a person labelling the design would."""
    import geopandas as gpd
    from shapely.geometry import Point

    rng = np.random.default_rng(seed)
    xmin, ymin, xmax, ymax = SMALL_AOI["31UFT"]
    xs, ys = rng.uniform(xmin + 10, xmax - 10, n), rng.uniform(ymin + 10, ymax - 10, n)
    with rasterio.open(demo / "truth" / "31UFT_2018.tif") as truth:
        found = np.array([v[0] for v in truth.sample(zip(xs, ys))])
    own = np.where((found >= 300) & (found < 400), *codes)
    gpd.GeoDataFrame({"reference": own}, geometry=[Point(x, y) for x, y in zip(xs, ys)],
                     crs="EPSG:32631").to_file(path)
    return path


@pytest.mark.parametrize("codes", [(100, 200), (1, 2)])
def test_monthly_composites_and_own_codes_run_end_to_end(codes, demo, tmp_path):
    catalogue = write_composites(demo, tmp_path / "composites")
    polygons, mapping = own_labels(demo, tmp_path, codes)
    (tmp_path / "reference").mkdir()
    _labelled_points(demo, tmp_path / "reference" / "31UFT_2018.gpkg", codes)
    cfg = {
        "tiles": ["31UFT"], "years": [2018, 2019], "aoi": {"31UFT": SMALL_AOI["31UFT"]},
        "stac": {"catalog": str(catalogue)},
        "cube": {"bands": BANDS, "mask": "none", "period": "P1M", "boa_add_offset": 0, "block_px": 64},
        "labels": {"reference": polygons, "code_column": "own", "mapping": mapping},
        "sample": {"per_class": 200, "block_px": 16},
        "models": ["rf"], "model_params": {"rf": {"n_estimators": 30}},
        "assess": {"reference": "reference/{tile}_{year}.gpkg"},
    }
    (tmp_path / "own.yaml").write_text(yaml.safe_dump(cfg))
    done = snakemake(tmp_path, configfile=tmp_path / "own.yaml", timeout=1200)
    assert done.returncode == 0, done.stderr[-4000:]
    for year, months in ((2018, 12), (2019, 8)):
        with rasterio.open(tmp_path / "results" / "31UFT" / str(year) / "cube.tif") as ds:
            steps = json.loads(ds.tags()["item_steps"])
            data = ds.read()
        assert steps == {f"composite_31UFT_{year}_{m:02d}": m - 1 for m in range(1, months + 1)}
        assert not (data == 32767).any()  # 65535 (no data) never read as a value
    accuracy = pd.read_csv(tmp_path / "results" / "accuracy.tsv", sep="\t").set_index("map")
    row = accuracy.loc["31UFT_2018_rf"]
    assert 0.5 < row["reference_OA"] <= 1 and 0 < row["reference_OA_ci95"] < 0.3, row.to_dict()
    assert row["quote"] == (f"OA {row['reference_OA']:.3f} ± {row['reference_OA_ci95']:.3f} (reference sample of 80 "
                            "points, 95 % CI)"), row.to_dict()
    assert np.isnan(accuracy.loc["31UFT_2019_rf", "reference_OA"])  # not labelled yet
    with rasterio.open(tmp_path / "results" / "maps" / "31UFT_2018_rf.tif") as ds:
        assert set(np.unique(ds.read(1))) - {ds.nodata} <= set(codes)
