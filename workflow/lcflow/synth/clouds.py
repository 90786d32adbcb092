"""Clouds, shadows and the Scene Classification Layer, with the misses a real SCL has.

Thick cloud cores are flagged 9, their fringes 8, but the thinnest haze is left unflagged; shadows are
flagged 3 on most but not all of their pixels; some scenes carry thin cirrus (10).
"""

import numpy as np

from lcflow.synth.landscape import smooth_noise
from lcflow.synth.spectra import BANDS, CLOUD, WATER


def cloud_cover_fraction(rng: np.random.Generator) -> float:
    """Fraction of a scene under cloud: many clear scenes, many partly cloudy, a few overcast."""
    u = rng.random()
    if u < 0.35:
        return float(rng.uniform(0.0, 0.03))
    if u < 0.9:
        return float(rng.uniform(0.05, 0.6))
    return float(rng.uniform(0.85, 1.0))


def observe(
    clear: np.ndarray, rng: np.random.Generator, cover: float
) -> tuple[np.ndarray, np.ndarray]:
    """Cloud a clear-sky scene (B, rows, cols); return (reflectance, SCL) at 10 m."""
    nb, h, w = clear.shape
    refl = clear.copy()
    scl = np.zeros((h, w), dtype=np.uint8)
    alpha = np.zeros((h, w), dtype=np.float32)
    if cover > 0.005:
        field = smooth_noise(rng, (h, w), sigma=rng.uniform(8, 20))
        thr = np.quantile(field, 1.0 - cover)
        alpha = np.clip((field - thr) / 0.6 + 0.15, 0.0, 1.0) * (field > thr - 0.25)
        dy, dx = int(rng.integers(6, 16)), int(rng.integers(6, 16))
        shadow = np.roll(alpha, (dy, dx), axis=(0, 1)) > 0.5
        shadow &= alpha < 0.1
        refl[:, shadow] *= 0.45
        refl = (1 - alpha) * refl + alpha * CLOUD[:, None, None]
        scl[shadow & (rng.random((h, w)) < 0.85)] = 3
    nir, red = refl[BANDS.index("B08")], refl[BANDS.index("B04")]
    ndvi = (nir - red) / (nir + red + 1e-6)
    clear_class = np.where(
        nir < 2.5 * WATER[BANDS.index("B08")] + 0.02, 6, np.where(ndvi > 0.4, 4, 5)
    )
    scl = np.where(scl == 0, clear_class, scl).astype(np.uint8)
    scl[alpha >= 0.35] = 8
    scl[alpha >= 0.65] = 9
    if rng.random() < 0.15:
        haze = np.clip(smooth_noise(rng, (h, w), sigma=30) - 0.5, 0, None) * 0.12
        refl = (1 - haze) * refl + haze * CLOUD[:, None, None]
        scl[(haze > 0.04) & (alpha < 0.35)] = 10
    return refl, scl
