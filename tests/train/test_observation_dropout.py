"""Observation dropout (lcflow.train.loop.observation_dropout): steps hidden as if never observed; patch
models have none to hide."""

import numpy as np
import pytest

from lcflow.errors import LcflowError
from lcflow.train.models.hyperparameters import check


def test_observation_dropout_is_the_series_prepared_with_those_steps_missing():
    """The hidden steps' flags are 0 and every value is what ``prepare`` makes of the raw series with those
    steps missing (an independent path: numba's gap filling in numpy); a series that would lose every
    observation keeps them, one never observed stays as it was, the features after the flag are kept."""
    import torch

    from lcflow.common.features import Standardiser, prepare, with_position
    from lcflow.train.loop.observation_dropout import drop_observations

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 20, 3)).astype(np.float32)
    x[rng.random((400, 20)) < 0.4] = np.nan
    x[5] = np.nan  # never observed
    x[6] = np.nan
    x[6, 7] = 1.0  # one observation
    plain = Standardiser(np.zeros(3, np.float32), np.ones(3, np.float32), clip=1e9)
    prepared = with_position(prepare(x, plain)[0], rng.uniform(-60, 60, (400, 2)))
    torch.manual_seed(1)
    out = drop_observations(torch.from_numpy(prepared), 0.5, 3).numpy()
    kept, observed = out[:, :, 3] > 0.5, prepared[:, :, 3] > 0.5
    assert not (kept & ~observed).any() and 0.4 < kept.sum() / observed.sum() < 0.6
    hidden = x.copy()
    hidden[~kept] = np.nan
    np.testing.assert_allclose(out[:, :, :4], prepare(hidden, plain)[0], atol=1e-6)
    np.testing.assert_array_equal(out[:, :, 4:], prepared[:, :, 4:])
    np.testing.assert_array_equal(out[5], prepared[5])
    np.testing.assert_array_equal(out[6], prepared[6])
    assert torch.equal(drop_observations(torch.from_numpy(prepared), 0.0, 3), torch.from_numpy(prepared))


def test_patches_have_no_observed_steps_to_hide():
    with pytest.raises(LcflowError, match="unknown parameter 'drop_observations' for model resnet"):
        check("resnet", {"drop_observations": 0.3})
