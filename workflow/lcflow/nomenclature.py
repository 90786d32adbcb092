"""Class nomenclatures: CORINE Land Cover at levels 1-3 (official EEA legend) or a user mapping file.

A nomenclature maps CLC level-3 codes to class codes, and gives each class a name and a colour.
"""

import csv
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from .errors import LcflowError

CLC_NODATA_GRID = 48
CLC_UNCLASSIFIED_GRID = (49, 50, 255)


@dataclass(frozen=True)
class ClcEntry:
    grid_code: int
    clc_code: int
    label1: str
    label2: str
    label3: str
    rgb: tuple[int, int, int]


def clc_legend() -> list[ClcEntry]:
    """The 44 CLC level-3 classes of the official legend (grid codes 1..44)."""
    text = resources.files("lcflow").joinpath("clc_legend.csv").read_text()
    rows = []
    for r in csv.DictReader(text.splitlines()):
        code = int(r["clc_code"])
        if 111 <= code <= 523:
            rgb = (int(r["red"]), int(r["green"]), int(r["blue"]))
            rows.append(ClcEntry(int(r["grid_code"]), code, r["label1"], r["label2"], r["label3"], rgb))
    return rows


def grid_to_clc_lut() -> np.ndarray:
    """Lookup table grid code (0..255) -> CLC level-3 code, 0 where not a class."""
    lut = np.zeros(256, dtype=np.uint16)
    for e in clc_legend():
        lut[e.grid_code] = e.clc_code
    return lut


#: values of a grid-coded raster that are no class: 48 no data, 49/50/255 unclassified; 0 a common fill
GRID_NOT_A_CLASS = frozenset({0, CLC_NODATA_GRID, *CLC_UNCLASSIFIED_GRID})
#: values of a CLC-coded raster that are no class: 990/995 unclassified land/water, 999 no data; 0 fill
CLC_NOT_A_CLASS = frozenset({0, 990, 995, 999})


def corine_coding(values: np.ndarray, nodata: float | None, where: str) -> str:
    """``"grid"`` (codes 1..44) or ``"clc"`` (111..523), decided on every value present.

    The two sets do not overlap, so a raster can only be one or the other: a mix, or a value that is
    neither a class nor a documented no-class value, is refused with the values listed.
    """
    present = {int(v) for v in np.unique(values) if not (nodata is not None and v == nodata)}
    grid = {e.grid_code for e in clc_legend()}
    clc = {e.clc_code for e in clc_legend()}
    as_grid, as_clc = present & grid, present & clc
    if as_grid and as_clc:
        raise LcflowError(f"{where}: the CORINE raster mixes grid codes (1..44: {_listed(as_grid)}) and CLC codes "
                          f"(111..523: {_listed(as_clc)})")
    coding = "clc" if as_clc else "grid"
    unknown = present - (clc | CLC_NOT_A_CLASS if coding == "clc" else grid | GRID_NOT_A_CLASS)
    if unknown:
        kind = "CLC codes 111..523" if coding == "clc" else "grid codes 1..44"
        raise LcflowError(f"{where}: value(s) {_listed(unknown)} of the CORINE raster are not CORINE codes "
                          f"(read as {kind}; declare fill values as the raster's nodata)")
    return coding


def _listed(values: set[int], n: int = 10) -> str:
    v = sorted(values)
    return ", ".join(map(str, v[:n])) + (f" ... ({len(v)} values)" if len(v) > n else "")


def clc_codes_from_raster(values: np.ndarray, nodata: float | None = None, where: str = "CORINE raster") -> np.ndarray:
    """CLC level-3 codes from a CORINE raster stored either as grid codes (1..44) or as CLC codes.

    The coding is decided by :func:`corine_coding`; everything that is not a class becomes 0.
    """
    v = np.asarray(values).astype(np.int64)
    coding = corine_coding(v, nodata, where)
    if coding == "clc":
        valid_clc = np.isin(v, [e.clc_code for e in clc_legend()])
        return np.where(valid_clc, v, 0).astype(np.uint16)
    lut = grid_to_clc_lut()
    inside = (v >= 0) & (v <= 255)
    return np.where(inside, lut[np.clip(v, 0, 255)], 0).astype(np.uint16)


@dataclass
class Nomenclature:
    """CLC level-3 code -> class code, with class names and colours."""

    name: str
    mapping: dict[int, int]
    names: dict[int, str]
    colors: dict[int, tuple[int, int, int]] = field(default_factory=dict)

    @property
    def codes(self) -> list[int]:
        return sorted(self.names)

    @property
    def dtype(self) -> str:
        return "uint8" if max(self.codes) < 255 else "uint16"

    @property
    def nodata(self) -> int:
        return 255 if self.dtype == "uint8" else 65535

    def apply(self, clc: np.ndarray) -> np.ndarray:
        """Map CLC level-3 codes to class codes; unmapped and 0 become nodata."""
        lut = np.full(1024, self.nodata, dtype=np.int64)
        for src, dst in self.mapping.items():
            lut[src] = dst
        out = lut[np.clip(np.asarray(clc, dtype=np.int64), 0, 1023)]
        return out.astype(self.dtype)


def clc_level(level: int) -> Nomenclature:
    """CORINE at level 1 (codes 1..5), 2 (11..52) or 3 (111..523). Colours of a group: its first class."""
    if level not in (1, 2, 3):
        raise LcflowError(f"labels.level = {level!r}: CORINE levels are 1, 2 or 3")
    mapping, names, colors = {}, {}, {}
    for e in clc_legend():
        code = e.clc_code // (10 ** (3 - level))
        mapping[e.clc_code] = code
        if code not in names:
            names[code] = (e.label1, e.label2, e.label3)[level - 1]
            colors[code] = e.rgb
    return Nomenclature(f"CLC level {level}", mapping, names, colors)


def from_mapping_file(path: str | Path) -> Nomenclature:
    """A custom nomenclature: CSV with columns clc_code, class_code, class_name and optional red, green, blue."""
    path = Path(path)
    if not path.exists():
        raise LcflowError(f"nomenclature mapping file {path} does not exist")
    mapping, names, colors = {}, {}, {}
    known = {e.clc_code for e in clc_legend()}
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        need = {"clc_code", "class_code", "class_name"}
        missing = need - set(reader.fieldnames or [])
        if missing:
            raise LcflowError(f"{path}: missing column(s) {sorted(missing)}")
        for lineno, r in enumerate(reader, start=2):
            try:
                src, dst = int(r["clc_code"]), int(r["class_code"])
            except ValueError as exc:
                raise LcflowError(f"{path}:{lineno}: codes must be integers ({exc})") from exc
            if src not in known:
                raise LcflowError(f"{path}:{lineno}: clc_code {src} is not a CLC level-3 code")
            if not 0 < dst < 65535:
                raise LcflowError(f"{path}:{lineno}: class_code {dst} must be within 1..65534")
            mapping[src] = dst
            names.setdefault(dst, r["class_name"])
            if r.get("red") not in (None, ""):
                colors.setdefault(dst, (int(r["red"]), int(r["green"]), int(r["blue"])))
    if not mapping:
        raise LcflowError(f"{path}: no rows")
    return Nomenclature(path.stem, mapping, names, colors)


def load(level: int = 2, mapping_file: str | None = None) -> Nomenclature:
    """The configured nomenclature: a mapping file when given, else the CORINE level."""
    return from_mapping_file(mapping_file) if mapping_file else clc_level(level)
