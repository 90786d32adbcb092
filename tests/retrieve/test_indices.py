import numpy as np
import pytest
import yaml

from lcflow.errors import LcflowError
from lcflow.retrieve import indices, sentinel2

from ..conftest import ROOT


def test_index_values_on_known_reflectance():
    bands = ["B02", "B04", "B05", "B08", "B11"]
    r = np.array([0.05, 0.10, 0.20, 0.50, 0.25], dtype=np.float32)  # reflectance of a green crop
    values = (r * 10000).reshape(1, 5, 1, 1)
    got = indices.compute(["NDVI", "EVI", "SAVI", "NDBI", "NDRE"], values, bands, 10000.0)[0, :, 0, 0] / 10000
    assert got == pytest.approx([0.4 / 0.6, 2.5 * 0.4 / (0.5 + 0.6 - 0.375 + 1), 1.5 * 0.4 / 1.1,
                                 -0.25 / 0.75, 0.3 / 0.7], rel=1e-5)


def test_missing_values_and_zero_sums_give_nan():
    values = np.array([[0.0, 0.0], [np.nan, 3000.0], [2000.0, 3000.0]], dtype=np.float32).reshape(3, 2, 1, 1)
    ndvi = indices.compute(["NDVI"], values, ["B04", "B08"], 10000.0)[:, 0, 0, 0]
    assert np.isnan(ndvi[0]) and np.isnan(ndvi[1]) and ndvi[2] == pytest.approx(0.2 * 10000)


def test_an_index_needs_its_bands_and_a_known_name():
    assert indices.check(["NDVI"], ["B04", "B08"]) == ["NDVI"]
    with pytest.raises(LcflowError, match="index NDWI needs band\\(s\\) B03"):
        indices.check(["NDWI"], ["B04", "B08"])
    with pytest.raises(LcflowError, match="unknown spectral index 'NDXI'"):
        indices.check(["NDXI"], ["B04"])


def test_one_list_of_indices_for_cubes_samples_and_config():
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert schema["properties"]["cube"]["properties"]["indices"]["items"]["enum"] == list(indices.INDICES)
    assert sentinel2.SPECTRAL_INDICES == tuple(indices.INDICES)
    assert all(set(needs) <= set(sentinel2.REFLECTANCE_BANDS) for needs, _ in indices.INDICES.values())
