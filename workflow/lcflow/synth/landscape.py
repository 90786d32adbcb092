"""True land-cover maps of a synthetic landscape: fields, forests, a river, a town, wetland; and its changes."""

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

# CLC level-3 classes of the demo landscape
URBAN, INDUSTRIAL, ARABLE, PASTURE = 112, 121, 211, 231
BROADLEAF, CONIFER, SHRUB, MARSH, WATER = 311, 312, 324, 411, 512
DEMO_CLASSES = (URBAN, INDUSTRIAL, ARABLE, PASTURE, BROADLEAF, CONIFER, SHRUB, MARSH, WATER)


@dataclass
class Landscape:
    """Per-pixel truth for two consecutive years, and the parcel each pixel belongs to."""

    before: np.ndarray  # CLC level-3 codes, first year
    after: np.ndarray  # CLC level-3 codes, second year
    # parcel id per pixel (fields, forest stands, ...), for per-object variation
    parcels: np.ndarray


def smooth_noise(rng: np.random.Generator, shape: tuple[int, int], sigma: float) -> np.ndarray:
    """Gaussian-filtered white noise scaled to unit variance: blobs of about ``sigma`` pixels."""
    n = ndimage.gaussian_filter(rng.standard_normal(shape), sigma, mode="wrap")
    return (n - n.mean()) / (n.std() + 1e-12)


def parcels(
    rng: np.random.Generator, shape: tuple[int, int], min_side: int = 10, max_side: int = 40
) -> np.ndarray:
    """Rectangular parcels from recursive splits, the way field boundaries cut farmland."""
    out = np.zeros(shape, dtype=np.int32)
    stack = [(0, 0, shape[0], shape[1])]
    next_id = 1
    while stack:
        r0, c0, r1, c1 = stack.pop()
        h, w = r1 - r0, c1 - c0
        split_rows = h > max_side or (h >= 2 * min_side and rng.random() < 0.3 and h >= w)
        split_cols = w > max_side or (w >= 2 * min_side and rng.random() < 0.3)
        if split_rows and h >= 2 * min_side:
            cut = int(rng.integers(r0 + min_side, r1 - min_side + 1))
            stack += [(r0, c0, cut, c1), (cut, c0, r1, c1)]
        elif split_cols and w >= 2 * min_side:
            cut = int(rng.integers(c0 + min_side, c1 - min_side + 1))
            stack += [(r0, c0, r1, cut), (r0, cut, r1, c1)]
        else:
            out[r0:r1, c0:c1] = next_id
            next_id += 1
    return out


def _top(field: np.ndarray, fraction: float) -> np.ndarray:
    return field > np.quantile(field, 1.0 - fraction)


def generate(rng: np.random.Generator, size: int, change_fraction: float = 0.03) -> Landscape:
    """A landscape of ``size`` x ``size`` pixels at 10 m and its state one year later."""
    shape = (size, size)
    ids = parcels(rng, shape)
    n_parcels = int(ids.max()) + 1
    cls = np.where(rng.random(n_parcels) < 0.55, ARABLE, PASTURE)[ids].astype(np.uint16)

    forest = _top(smooth_noise(rng, shape, size / 12), 0.28)
    conifer_zone = smooth_noise(rng, shape, size / 20) > 0.2
    cls[forest] = np.where(conifer_zone, CONIFER, BROADLEAF)[forest]

    edge = ndimage.binary_dilation(forest, iterations=3) & ~forest
    cls[edge & (smooth_noise(rng, shape, 3) > 0.6)] = SHRUB
    cls[_top(smooth_noise(rng, shape, size / 25), 0.05) & ~forest] = SHRUB  # heath and scrubland

    town = _top(smooth_noise(rng, shape, size / 10), 0.09)
    cls[town] = URBAN
    cls[town & _top(smooth_noise(rng, shape, 5), 0.35)] = INDUSTRIAL

    rows, cols = np.mgrid[0:size, 0:size]
    phase, period = rng.uniform(0, 2 * np.pi), rng.uniform(0.6, 1.2) * size
    centre = size * (0.3 + 0.4 * rng.random()) + size * 0.08 * np.sin(
        2 * np.pi * cols / period + phase
    )
    river = np.abs(rows - centre) < rng.uniform(2.5, 4.5)
    lake = _top(smooth_noise(rng, shape, size / 16), 0.03)
    water = river | lake
    near_water = ndimage.distance_transform_edt(~water) <= 6
    cls[near_water & ~water & ~town & (smooth_noise(rng, shape, 4) > 0.0)] = MARSH
    cls[water] = WATER

    after = cls.copy()
    target = change_fraction * cls.size
    changed = 0
    order = rng.permutation(n_parcels)
    for pid in order:
        if changed >= target:
            break
        inside = ids == pid
        n = int(inside.sum())
        if n == 0 or n > target - changed + 200:
            continue
        majority = np.bincount(cls[inside]).argmax()
        if majority in (BROADLEAF, CONIFER) and (
            np.isin(cls[inside], (BROADLEAF, CONIFER)).mean() > 0.8
        ):
            clear = inside & np.isin(cls, (BROADLEAF, CONIFER))
            after[clear] = SHRUB  # clear-cut: young regrowth
            changed += int(clear.sum())
        elif majority == ARABLE and changed < target / 2 and (cls[inside] == ARABLE).all():
            after[inside] = INDUSTRIAL  # construction on farmland
            changed += n
    return Landscape(cls, after, ids)
