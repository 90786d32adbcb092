"""A window read with a halo: the values rasterio's boundless read gives, without its warped VRT."""

import numpy as np
import pytest
import rasterio
from rasterio.windows import Window

from lcflow.common.raster import Grid, read_with_halo


@pytest.fixture(scope="module")
def raster(tmp_path_factory):
    """A 3-band uint8 raster of 70 x 50 px (tiled 16 px), every value distinct by position and band."""
    path = tmp_path_factory.mktemp("halo") / "r.tif"
    grid = Grid.from_bounds(32631, (600000, 5800000, 600000 + 10 * 70, 5800000 + 10 * 50), 10)
    data = (np.arange(3 * 50 * 70).reshape(3, 50, 70) % 251).astype(np.uint8)
    with rasterio.open(path, "w", driver="GTiff", dtype="uint8", count=3, tiled=True, blockxsize=16, blockysize=16,
                       **grid.profile()) as dst:
        dst.write(data)
    return path


@pytest.mark.parametrize("window", [
    Window(0, 0, 16, 16),  # a corner: the halo reaches out on two sides
    Window(32, 16, 16, 16),  # inside: no fill at all
    Window(64, 48, 6, 2),  # the last, cut window at the far corner
    Window(0, 20, 70, 10),  # as wide as the raster: out on both sides
    Window(-5, -5, 90, 70),  # larger than the raster
])
@pytest.mark.parametrize("halo", [0, 3, 10])
def test_the_values_are_rasterio_s_boundless_read(raster, window, halo):
    with rasterio.open(raster) as ds:
        grown = Window(window.col_off - halo, window.row_off - halo, window.width + 2 * halo, window.height + 2 * halo)
        expected = ds.read(window=grown, boundless=True, fill_value=255)
        got = read_with_halo(ds, window, halo, 255)
    assert got.dtype == expected.dtype and got.shape == (3, window.height + 2 * halo, window.width + 2 * halo)
    np.testing.assert_array_equal(got, expected)


def test_a_window_wholly_outside_is_all_fill(raster):
    with rasterio.open(raster) as ds:
        got = read_with_halo(ds, Window(100, 100, 8, 8), 2, 7)
    assert got.shape == (3, 12, 12) and (got == 7).all()
