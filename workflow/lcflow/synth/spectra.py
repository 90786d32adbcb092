"""Surface reflectance of each demo class through the year: endmember spectra mixed by phenology.

Bands in order B02 B03 B04 B05 B06 B07 B08 B8A B11 B12. Each class has a green-vegetation fraction
that follows its own calendar (sowing, harvest, leaf-on, mowing, flooding), varied per parcel.
"""

import numpy as np

from lcflow.synth import landscape as L

BANDS = ("B02", "B03", "B04", "B05", "B06", "B07", "B08", "B8A", "B11", "B12")

SOIL = np.array([0.07, 0.10, 0.13, 0.16, 0.18, 0.20, 0.22, 0.23, 0.32, 0.27])
VEG = np.array([0.03, 0.07, 0.035, 0.11, 0.30, 0.38, 0.42, 0.43, 0.21, 0.11])
DRY = np.array([0.06, 0.09, 0.11, 0.15, 0.21, 0.25, 0.28, 0.29, 0.35, 0.26])
CONIF = np.array([0.02, 0.04, 0.025, 0.065, 0.17, 0.22, 0.25, 0.26, 0.12, 0.055])
WATER = np.array([0.06, 0.055, 0.035, 0.025, 0.018, 0.015, 0.012, 0.011, 0.006, 0.004])
URBAN = np.array([0.09, 0.10, 0.11, 0.13, 0.15, 0.16, 0.17, 0.18, 0.22, 0.20])
INDUS = np.array([0.17, 0.18, 0.19, 0.20, 0.21, 0.22, 0.23, 0.23, 0.29, 0.27])
CLOUD = np.array([0.45, 0.44, 0.44, 0.45, 0.46, 0.46, 0.47, 0.47, 0.38, 0.30])


def rise(t: np.ndarray, centre, width) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(t - centre) / width))


def bump(t: np.ndarray, centre, width) -> np.ndarray:
    return np.exp(-0.5 * ((t - centre) / width) ** 2)


def _mix(g: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """g (T, N) fraction of endmember a, rest b -> (T, B, N)."""
    return g[:, None, :] * a[None, :, None] + (1 - g[:, None, :]) * b[None, :, None]


def _green_over(g: np.ndarray, background: np.ndarray) -> np.ndarray:
    """Green vegetation covering a fraction g (T, N) of a per-pixel background (T, B, N)."""
    return g[:, None, :] * VEG[None, :, None] + (1 - g[:, None, :]) * background


def _arable(t, rng, n_parcels, pid):
    """Winter cereal, spring crop or maize/beet per parcel: each its own sowing and harvest dates."""
    crop = rng.integers(0, 3, n_parcels)[pid]
    sow = np.where(
        crop == 0,
        -60,
        np.where(
            crop == 1, rng.uniform(95, 125, n_parcels)[pid], rng.uniform(125, 150, n_parcels)[pid]
        ),
    )
    harvest = np.where(
        crop == 0,
        rng.uniform(195, 215, n_parcels)[pid],
        np.where(
            crop == 1, rng.uniform(215, 235, n_parcels)[pid], rng.uniform(265, 295, n_parcels)[pid]
        ),
    )
    tt = t[:, None]
    g = 0.02 + 0.9 * rise(tt, sow + 25, 8) * (1 - rise(tt, harvest, 4))
    g = np.where(
        crop == 0, np.maximum(g, 0.35 * (1 - rise(tt, 90, 10)) * (1 - rise(tt, harvest, 4))), g
    )
    g = g + 0.25 * rise(tt, 290, 8) * (crop == 0)  # next winter crop emerging
    stubble = rise(tt, harvest + 2, 3) * (1 - rise(tt, harvest + 40, 5))
    bg = _mix(stubble, DRY, SOIL)
    return g, bg


def _pasture(t, rng, n_parcels, pid):
    m1, m2 = rng.uniform(140, 170, n_parcels)[pid], rng.uniform(200, 240, n_parcels)[pid]
    tt = t[:, None]
    g = 0.55 + 0.3 * bump(tt, 150, 60)
    for m in (m1, m2):
        g = g * (1 - 0.45 * (tt >= m) * np.exp(-np.clip(tt - m, 0, None) / 15))
    return g, _mix(np.ones_like(g), DRY, SOIL)


def _deciduous(t, rng, n_parcels, pid, base=0.1, amp=0.8, on=115, off=295):
    tt = t[:, None]
    jitter = rng.normal(0, 4, n_parcels)[pid]
    g = base + amp * rise(tt, on + jitter, 8) * (1 - rise(tt, off + jitter, 10))
    return g, _mix(np.full_like(g, 0.7), DRY, CONIF)


def reflectance(
    classes: np.ndarray, parcels: np.ndarray, doy: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Clear-sky reflectance (T, B, rows, cols) of a class map on the given days of year."""
    t = np.asarray(doy, dtype=float)
    n_parcels = int(parcels.max()) + 1
    flat_cls, flat_pid = classes.ravel(), parcels.ravel()
    out = np.zeros((t.size, len(BANDS), flat_cls.size), dtype=np.float32)
    for code in np.unique(flat_cls):
        idx = np.flatnonzero(flat_cls == code)
        pid = flat_pid[idx]
        tt = t[:, None]
        if code == L.ARABLE:
            g, bg = _arable(t, rng, n_parcels, pid)
            r = _green_over(g, bg)
        elif code == L.PASTURE:
            g, bg = _pasture(t, rng, n_parcels, pid)
            r = _green_over(g, bg)
        elif code == L.BROADLEAF:
            g, bg = _deciduous(t, rng, n_parcels, pid)
            r = _green_over(g, bg)
        elif code == L.SHRUB:
            g, _ = _deciduous(t, rng, n_parcels, pid, base=0.25, amp=0.4, on=125, off=280)
            r = _mix(g, VEG, 0.5 * SOIL + 0.5 * DRY)
        elif code == L.CONIFER:
            g = 0.85 + 0.1 * bump(tt, 190, 50) * np.ones((1, idx.size))
            r = _mix(g, CONIF, DRY)
        elif code == L.MARSH:
            w = 0.55 - 0.35 * bump(tt, 200, 70) * np.ones((1, idx.size))
            g, _ = _deciduous(t, rng, n_parcels, pid, base=0.2, amp=0.6, on=135, off=280)
            r = _mix(w, WATER, np.zeros(len(BANDS))) + (1 - w[:, None, :]) * _mix(g, VEG, DRY)
        elif code == L.WATER:
            algae = 0.08 * bump(tt, 200, 40) * np.ones((1, idx.size))
            r = _mix(algae, VEG, WATER)
        elif code == L.URBAN:
            g = 0.3 + 0.4 * rise(tt, 120, 10) * (1 - rise(tt, 285, 10)) * np.ones((1, idx.size))
            r = 0.75 * URBAN[None, :, None] + 0.25 * _mix(g, VEG, DRY)
        elif code == L.INDUSTRIAL:
            r = np.repeat(INDUS[None, :, None], t.size, axis=0) * np.ones((1, 1, idx.size))
        else:
            raise ValueError(f"no spectral model for class {code}")
        brightness = rng.normal(1.0, 0.05, n_parcels)[pid]
        out[:, :, idx] = r * brightness[None, None, :]
    # within-parcel variation
    out *= rng.normal(1.0, 0.03, out.shape[2]).astype(np.float32)[None, None, :]
    # sensor and residual atmospheric noise
    out += rng.normal(0.0, 0.008, out.shape).astype(np.float32)
    return out.reshape(t.size, len(BANDS), *classes.shape)
