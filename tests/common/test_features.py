"""Model input (lcflow.common.features): gaps filled in time, observations flagged, robust standardisation."""

import numpy as np
import pytest

from lcflow.common.features import Standardiser, fill_gaps, prepare


def test_fill_gaps_interpolates_in_time():
    nan = np.nan
    x = np.array([[nan, 2.0, nan, nan, 8.0, nan]], dtype=np.float32)[..., None]
    assert fill_gaps(x)[0, :, 0].tolist() == [2.0, 2.0, 4.0, 6.0, 8.0, 8.0]
    empty = np.full((1, 4, 1), nan, dtype=np.float32)
    assert np.isnan(fill_gaps(empty)).all()
    full = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    assert np.array_equal(fill_gaps(full), full)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_fill_gaps_is_numpys_interpolation_of_every_series(dtype, layout):
    """Against np.interp, series by series: observed steps kept to the bit, gaps between them within
    float32 rounding, ends the nearest observed value, unobserved series NaN."""
    rng = np.random.default_rng(7)
    x = (rng.normal(size=(300, 11, 4)) * 3000 + 500).astype(dtype)
    x[rng.random(x.shape) < 0.45] = np.nan
    x[rng.random(x.shape) < 0.02] = np.inf  # an infinite value is a gap too
    x[:5] = np.nan
    x[5:10, :, 1] = -np.inf
    if layout == "strided":  # as the cube's compositing passes a band-first view
        x = np.moveaxis(np.ascontiguousarray(np.moveaxis(x, 2, 0)), 0, 2)
    filled = fill_gaps(x)
    assert filled.dtype == np.float32 and filled.shape == x.shape
    steps = np.arange(x.shape[1])
    for i in range(x.shape[0]):
        for k in range(x.shape[2]):
            series, got = x[i, :, k], filled[i, :, k]
            seen = np.isfinite(series)
            if not seen.any():
                assert np.isnan(got).all()
                continue
            expected = np.interp(steps, steps[seen], series[seen].astype(np.float64))
            assert np.array_equal(got[seen], series[seen].astype(np.float32))
            np.testing.assert_allclose(got, expected, rtol=2e-7, atol=1e-3)


def test_prepare_standardises_and_flags_observations():
    rng = np.random.default_rng(0)
    x = rng.normal(100, 10, (50, 4, 3)).astype(np.float32)
    x[0, 1] = np.nan
    x[1] = np.nan
    s = Standardiser.fit(x)
    again = Standardiser.from_dict(s.to_dict())
    assert np.allclose(again.center, s.center) and np.allclose(again.scale, s.scale) and again.clip == s.clip
    out, empty = prepare(x, s)
    assert out.shape == (50, 4, 4)
    assert empty.tolist() == [False, True] + [False] * 48
    assert out[0, 1, 3] == 0.0 and out[0, 0, 3] == 1.0
    assert abs(float(out[2:, :, :3].mean())) < 0.2 and np.isfinite(out).all()


def test_a_step_with_some_bands_is_observed_and_its_missing_bands_are_filled_in_time():
    """A table's own gaps may be per band (a value missing from a field campaign's export, a band another
    mask left out): a step with any band observed is observed, its missing bands filled from the same
    band's other steps, and a row with no complete step still has data (as the samples table counts it)."""
    rng = np.random.default_rng(2)
    x = rng.normal(100, 10, (6, 4, 3)).astype(np.float32)
    x[0, 1, 2] = np.nan  # one band missing at one step
    x[1, :, 0] = np.nan  # one band missing at every step: no step is complete
    x[2, :2] = np.nan  # whole steps missing: as a cloud leaves them
    x[3] = np.nan
    s = Standardiser.fit(x)
    out, empty = prepare(x, s)
    assert empty.tolist() == [False, False, False, True, False, False]
    assert out[0, :, 3].tolist() == [1, 1, 1, 1] and out[1, :, 3].tolist() == [1, 1, 1, 1]
    assert out[2, :, 3].tolist() == [0, 0, 1, 1]
    filled = (x[0, 0, 2] + x[0, 2, 2]) / 2  # midway between its neighbours in time
    assert np.isclose(out[0, 1, 2], s(np.full((1, 1, 3), filled))[0, 0, 2], atol=1e-5)
    assert np.array_equal(out[0, :, :2], s(x[0:1])[0, :, :2])  # the step's observed bands are its own
    assert (out[1, :, 0] == 0).all()  # a band never observed in a series: the centre of its scale
    assert np.array_equal(out[1, :, 1:3], s(x[1:2])[0, :, 1:3])


def test_standardisation_is_robust_to_outliers():
    """Clouds the mask missed (reflectance far above 10000) neither set the scale nor dominate a series."""
    rng = np.random.default_rng(1)
    x = rng.normal(1500, 300, (400, 12, 2)).astype(np.float32)
    clean = Standardiser.fit(x)
    x[:20, 3, :] = 18000  # 5 % of the samples with one bright outlier date
    s = Standardiser.fit(x)
    assert np.allclose(s.center, clean.center, rtol=0.02) and np.allclose(s.scale, clean.scale, rtol=0.1)
    assert np.nanstd(x[..., 0]) > 3 * s.scale[0]  # a plain standard deviation would have been inflated
    z = s(x)
    assert z.max() == s.clip and np.abs(z[20:]).max() < s.clip
    assert abs(float(np.median(z[20:]))) < 0.05
