import numpy as np
import pytest
from affine import Affine
from rasterio.warp import Resampling, reproject

from lcflow.retrieve import resample

SOURCE = Affine(20, 0, 600000, 0, -20, 5800000)  # a 20 m band's grid


@pytest.fixture(scope="module")
def band() -> np.ndarray:
    rng = np.random.default_rng(1)
    data = rng.integers(100, 5000, (2, 300, 300)).astype(np.uint16)
    data[:, 50:60, 50:70] = 0  # a no-data hole
    data[0, rng.random((300, 300)) < 0.05] = 0  # scattered no data
    return data


@pytest.mark.parametrize("left,top,shape,res", [
    (2040, 2040, (256, 256), 10),  # a cube window with its halo: 10 m, offset by one pixel
    (5130, 3330, (100, 77), 10),  # not on the 20 m grid
    (200, 200, (50, 50), 7.5),  # a ratio that is not whole
    (0, 0, (40, 30), 10),  # at the source's edge
])
def test_bilinear_is_gdals_bilinear(band, left, top, shape, res):
    mine, gdal = _bilinear_and_gdals(band, left, top, shape, res)
    assert mine.dtype == np.uint16 and (gdal > 0).mean() > 0.8
    assert np.array_equal(mine, gdal)  # values, rounding and where there is no data


def test_bilinear_on_a_ratio_without_a_short_period_is_gdals_to_a_unit(band):
    """20 m onto 6.9 m: weights that do not repeat within 16 px, gathered pixel by pixel; GDAL computes
    the positions in double, here the weights are float32: a value may round the other way."""
    mine, gdal = _bilinear_and_gdals(band, 310, 270, (60, 70), 6.9)
    assert (gdal > 0).mean() > 0.8
    assert np.array_equal(mine == 0, gdal == 0)
    difference = np.abs(mine.astype(int) - gdal)
    assert difference.max() <= 1 and (difference > 0).mean() < 0.001


def test_bilinear_without_no_data_is_gdals_bilinear(band):
    """The common window, inside the swath with every source pixel valid, takes a shorter path."""
    mine, gdal = _bilinear_and_gdals(band[1:], 3030, 2530, (64, 90), 10)
    assert (gdal > 0).all()
    assert np.array_equal(mine, gdal)


@pytest.mark.parametrize("res", [10, 7.5, 6.9])
def test_compiled_interpolation_is_the_array_formula_to_the_bit(band, res):
    """The compiled pass is ``low * (1 - w) + high * w`` in float32, along the rows, then the columns."""
    dst = Affine(res, 0, 600000 + 2040, 0, -res, 5800000 - 2040)
    src, shape = resample.source_window(SOURCE, dst, (128, 96))
    rows = resample._Axis(dst.f, dst.e, 128, src.f, src.e, shape[0])
    cols = resample._Axis(dst.c, dst.a, 96, src.c, src.a, shape[1])
    values = band[:, 100:100 + shape[0], 100:100 + shape[1]].astype(np.float32) + 1  # no zero: no data
    along_rows = values[:, rows.low] * (1 - rows.weight[:, None]) + values[:, rows.low + 1] * rows.weight[:, None]
    expected = along_rows[..., cols.low] * (1 - cols.weight) + along_rows[..., cols.low + 1] * cols.weight
    got = resample.bilinear(values, src, dst, (128, 96))
    assert got.dtype == np.float32 and np.array_equal(got, expected)
    rounded = resample.bilinear(values.astype(np.uint16), src, dst, (128, 96))
    assert rounded.dtype == np.uint16 and np.array_equal(rounded, np.floor(expected + np.float32(0.5)))


def test_bilinear_at_the_top_of_the_type_is_gdals():
    """Values next to 65535 stay in uint16 (no wrap-around to 0), as GDAL's."""
    top = np.random.default_rng(2).integers(65530, 65536, (1, 300, 300)).astype(np.uint16)
    mine, gdal = _bilinear_and_gdals(top, 3030, 2530, (64, 90), 10)
    assert gdal.min() >= 65530
    assert np.array_equal(mine, gdal)


def _bilinear_and_gdals(band, left, top, shape, res):
    dst = Affine(res, 0, 600000 + left, 0, -res, 5800000 - top)
    gdal = np.zeros((len(band), *shape), np.uint16)
    for b in range(len(band)):
        reproject(band[b], gdal[b], src_transform=SOURCE, src_crs="EPSG:32631", dst_transform=dst,
                  dst_crs="EPSG:32631", resampling=Resampling.bilinear, src_nodata=0, dst_nodata=0)
    src, src_shape = resample.source_window(SOURCE, dst, shape)
    c0, r0 = round((src.c - SOURCE.c) / 20), round((SOURCE.f - src.f) / 20)
    padded = np.pad(band, ((0, 0), (1, 1), (1, 1)))  # the window may reach one pixel outside: no data there
    part = padded[:, r0 + 1:r0 + 1 + src_shape[0], c0 + 1:c0 + 1 + src_shape[1]]
    assert part.shape[1:] == src_shape
    return resample.bilinear(part, src, dst, shape, nodata=0), gdal


def test_source_window_covers_every_neighbour():
    dst = Affine(10, 0, 600010, 0, -10, 5799990)
    src, shape = resample.source_window(SOURCE, dst, (4, 4))
    # destination centres 600015..600045: source centres 600010, 600030, 600050 around them
    assert src.c == 600000 and src.f == 5800000 and shape == (3, 3)


@pytest.mark.parametrize("left,top,shape,res", [
    (2030, 2030, (258, 258), 10),  # SCL for a cube window with its 1 px halo
    (5130, 3330, (100, 77), 10),  # not on the 20 m grid
    (200, 200, (50, 50), 7.5),  # a ratio that is not whole
    (0, 0, (40, 30), 10),  # at the source's edge
    (400, 600, (30, 40), 20),  # the source's own grid: the window itself
])
def test_nearest_is_gdals_nearest(band, left, top, shape, res):
    scl = (band % 12).astype(np.uint8)
    dst = Affine(res, 0, 600000 + left, 0, -res, 5800000 - top)
    gdal = np.zeros((len(scl), *shape), np.uint8)
    for b in range(len(scl)):
        reproject(scl[b], gdal[b], src_transform=SOURCE, src_crs="EPSG:32631", dst_transform=dst,
                  dst_crs="EPSG:32631", resampling=Resampling.nearest, src_nodata=0, dst_nodata=0)
    src, src_shape = resample.source_window(SOURCE, dst, shape, "nearest")
    c0, r0 = round((src.c - SOURCE.c) / 20), round((SOURCE.f - src.f) / 20)
    assert c0 >= 0 and r0 >= 0
    part = scl[:, r0:r0 + src_shape[0], c0:c0 + src_shape[1]]
    assert part.shape[1:] == src_shape
    mine = resample.nearest(part, src, dst, shape)
    assert len(np.unique(mine)) == 12 and (gdal > 0).mean() > 0.8
    assert np.array_equal(mine, gdal)
    if res == 20:
        assert mine is part and src == dst  # nothing resampled, nothing copied


def test_source_window_for_nearest_is_the_pixels_under_the_centres():
    dst = Affine(10, 0, 600010, 0, -10, 5799990)
    src, shape = resample.source_window(SOURCE, dst, (4, 4), "nearest")
    # destination centres 600015..600045 lie in the source pixels 600000-600020 .. 600040-600060
    assert src.c == 600000 and src.f == 5800000 and shape == (3, 3)
    with pytest.raises(ValueError, match="cubic"):
        resample.source_window(SOURCE, dst, (4, 4), "cubic")
