"""Spectral indices of Sentinel-2 reflectance, as cube bands beside the reflectance bands.

Formulas and names follow Awesome Spectral Indices (Montero et al. 2023, Scientific Data 10:197), on
surface reflectance in 0..1. They are computed from each time step's composited bands, so an index
in the cube is exactly what a user computes from the cube's own bands.
"""

from collections.abc import Callable, Mapping

import numpy as np

from lcflow.errors import LcflowError


def _normalized_difference(a: str, b: str) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    def index(r: Mapping[str, np.ndarray]) -> np.ndarray:
        return _ratio(r[a] - r[b], r[a] + r[b])

    return index


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator != 0, numerator / denominator, np.nan).astype(np.float32)


def _evi(r: Mapping[str, np.ndarray]) -> np.ndarray:
    return _ratio(2.5 * (r["B08"] - r["B04"]), r["B08"] + 6.0 * r["B04"] - 7.5 * r["B02"] + 1.0)


def _savi(r: Mapping[str, np.ndarray]) -> np.ndarray:
    return _ratio(1.5 * (r["B08"] - r["B04"]), r["B08"] + r["B04"] + 0.5)


#: index -> (the bands it needs, its formula over reflectance 0..1)
INDICES: dict[str, tuple[tuple[str, ...], Callable[[Mapping[str, np.ndarray]], np.ndarray]]] = {
    "NDVI": (("B08", "B04"), _normalized_difference("B08", "B04")),
    "EVI": (("B08", "B04", "B02"), _evi),
    "SAVI": (("B08", "B04"), _savi),
    "NDWI": (("B03", "B08"), _normalized_difference("B03", "B08")),
    "MNDWI": (("B03", "B11"), _normalized_difference("B03", "B11")),
    "NDMI": (("B08", "B11"), _normalized_difference("B08", "B11")),
    "NBR": (("B08", "B12"), _normalized_difference("B08", "B12")),
    "NDBI": (("B11", "B08"), _normalized_difference("B11", "B08")),
    "NDRE": (("B08", "B05"), _normalized_difference("B08", "B05")),
}


def check(indices: list[str], bands: list[str], where: str = "cube.indices") -> list[str]:
    """Refuse unknown indices and indices whose bands are not among ``bands``, naming them."""
    for name in indices:
        if name not in INDICES:
            raise LcflowError(
                f"{where}: unknown spectral index {name!r}; known: {', '.join(INDICES)}"
            )
        missing = [b for b in INDICES[name][0] if b not in bands]
        if missing:
            raise LcflowError(
                f"{where}: index {name} needs band(s) {', '.join(missing)}, which the cube's bands "
                f"({', '.join(bands)}) do not include"
            )
    return list(indices)


def compute(indices: list[str], values: np.ndarray, bands: list[str], scale: float) -> np.ndarray:
    """The indices of ``values`` (..., bands, rows, cols) holding reflectance x ``scale``, in the same
    scale and layout (..., indices, rows, cols); NaN where a band has no value."""
    reflectance = {
        b: values[..., bands.index(b), :, :] / scale
        for b in {b for i in indices for b in INDICES[i][0]}
    }
    return np.stack([INDICES[name][1](reflectance) * scale for name in indices], axis=-3).astype(
        np.float32
    )
