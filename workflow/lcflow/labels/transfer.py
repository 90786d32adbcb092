"""Label transfer: use a reference-year map (CORINE 2018) for another year, minus the pixels that changed.

A pixel keeps its reference-year label in the target year only if its target-year time series is
close to its own reference-year series. The distance is the root mean square, over time steps and
bands, of the difference of the two series after gap filling and a robust per-band scaling fitted on
both years. What counts as close depends on the class (forests vary less from year to year than
arable land under rotation), so the threshold is per label: the class's median distance plus ``mad_k``
robust standard deviations (1.4826 x median absolute deviation). A change of class moves a pixel far
beyond its class's usual year-to-year variation; the usual variation stays inside.
"""

import warnings
from dataclasses import dataclass

import numpy as np

from lcflow.common.features import Standardiser, fill_gaps
from lcflow.defaults import default

MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class ChangeTest:
    """``mad_k`` 0 turns the test off (every pixel keeps its reference label)."""

    mad_k: float = float(default("sample.transfer.mad_k"))

    @property
    def enabled(self) -> bool:
        return self.mad_k > 0


def series_distance(target: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """RMS distance per pixel between two (samples, steps, bands) series in robust band units; NaN where
    either year has no observation at all."""
    both = np.concatenate([target, reference])
    scale = Standardiser.fit(both)
    a, b = scale(fill_gaps(target)), scale(fill_gaps(reference))
    with warnings.catch_warnings():
        # a pixel without any observation: NaN, dropped
        warnings.simplefilter("ignore", RuntimeWarning)
        d = np.sqrt(np.nanmean((a - b) ** 2, axis=(1, 2))) if a.size else np.zeros(len(target))
    return np.where(np.isfinite(a).any(axis=(1, 2)) & np.isfinite(b).any(axis=(1, 2)), d, np.nan)


def changed(distance: np.ndarray, labels: np.ndarray, test: ChangeTest) -> np.ndarray:
    """Which pixels moved beyond their class's usual year-to-year distance (or cannot be tested)."""
    if not test.enabled:
        return np.zeros(len(distance), dtype=bool)
    out = ~np.isfinite(distance)
    for c in np.unique(labels):
        members = (labels == c) & np.isfinite(distance)
        if not members.any():
            continue
        d = distance[members]
        median = np.median(d)
        spread = MAD_TO_SD * np.median(np.abs(d - median))
        out[members] = d > median + test.mad_k * spread
    return out
