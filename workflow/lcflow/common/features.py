"""Turn band time series with gaps into model input: fill gaps in time, standardise per band."""

import warnings
from dataclasses import dataclass

import numpy as np


def fill_gaps(x: np.ndarray) -> np.ndarray:
    """Linear interpolation over time of NaN steps per sample and band; ends take the nearest value.

    x: (samples, steps, bands). A series with no value at all stays NaN. Returns float32.
    """
    from lcflow.common.gap_filling import fill_linear

    x = np.asarray(x)
    return fill_linear(x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float32))


@dataclass
class Standardiser:
    """Per-band centre and scale, fitted on training samples, stored with the model.

    Robust: the median and the interquartile range (scaled to a normal's standard deviation) of every
    band over all samples and time steps, so clouds the mask missed or values above 10000 do not set
    the scale; standardised values are clipped to +-``clip``, so no single outlier dominates a series.
    """

    center: np.ndarray
    scale: np.ndarray
    clip: float = 6.0

    @classmethod
    def fit(cls, x: np.ndarray) -> "Standardiser":
        flat = np.moveaxis(x, 2, 0).reshape(x.shape[2], -1)  # (bands, samples * steps)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a band without any value
            q25, center, q75 = np.nanpercentile(flat, [25, 50, 75], axis=1)
            std = np.nanstd(flat, axis=1)
        scale = (q75 - q25) / 1.349
        scale = np.where(
            np.isfinite(scale) & (scale > 0),
            scale,
            np.where(np.isfinite(std) & (std > 0), std, 1.0),
        )
        return cls(np.nan_to_num(center).astype(np.float32), scale.astype(np.float32))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.clip((x - self.center) / self.scale, -self.clip, self.clip)

    def to_dict(self) -> dict:
        return {"center": self.center.tolist(), "scale": self.scale.tolist(), "clip": self.clip}

    @classmethod
    def from_dict(cls, d: dict) -> "Standardiser":
        return cls(
            np.asarray(d["center"], dtype=np.float32),
            np.asarray(d["scale"], dtype=np.float32),
            float(d["clip"]),
        )


#: samples prepared at a time: the float64 temporaries of gap filling stay a few tens of MB whatever the
#: window, and each sample's values are the same as when prepared all at once
PREPARE_CHUNK = 1 << 16


def prepare(x: np.ndarray, standardise: Standardiser) -> tuple[np.ndarray, np.ndarray]:
    """Model input (samples, steps, bands + 1): standardised gap-filled values plus an observed flag.

    A step is observed where any band has a value (a cube's masks leave all or none; a table's own gaps
    may be per band, each band then filled from its own steps). Also returns which samples have no
    value at all (they get no prediction), as :meth:`SampleTable.observed` counts rows.
    """
    n, t, b = x.shape
    out = np.empty((n, t, b + 1), dtype=np.float32)
    empty = np.empty(n, dtype=bool)
    for start in range(0, n, PREPARE_CHUNK):
        part = x[start : start + PREPARE_CHUNK]
        observed = np.isfinite(part).any(axis=2)
        empty[start : start + len(part)] = ~observed.any(axis=1)
        out[start : start + len(part), :, :b] = np.nan_to_num(standardise(fill_gaps(part)), nan=0.0)
        out[start : start + len(part), :, b] = observed
    return out, empty


def with_position(prepared: np.ndarray, latlon: np.ndarray) -> np.ndarray:
    """Prepared series (samples, steps, features) with each sample's latitude and longitude in degrees
    appended to every step's features: (samples, steps, features + 2)."""
    n, t, _ = prepared.shape
    where = np.broadcast_to(np.asarray(latlon, dtype=np.float32)[:, None, :], (n, t, 2))
    return np.concatenate([prepared, where], axis=2)


def prepare_patches(x: np.ndarray, standardise: Standardiser) -> tuple[np.ndarray, np.ndarray]:
    """Patches (samples, steps, bands, rows, cols) -> (samples, steps * (bands + 1), rows, cols): every
    pixel prepared as by :func:`prepare`, time steps stacked as channels. Also returns which pixels
    have no observation at all, (samples, rows, cols)."""
    n, t, b, h, w = x.shape
    pixels, empty = prepare(np.moveaxis(x, (3, 4), (1, 2)).reshape(-1, t, b), standardise)
    stacked = np.moveaxis(pixels.reshape(n, h, w, t * (b + 1)), 3, 1)
    return np.ascontiguousarray(stacked), empty.reshape(n, h, w)
