"""Class nomenclatures: CORINE Land Cover at levels 1-3 (official EEA legend) or a user mapping file.

A nomenclature maps CLC level-3 codes to class codes, and gives each class a name and a colour.
"""

import csv
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from lcflow.errors import LcflowError

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
    text = resources.files("lcflow.labels").joinpath("clc_legend.csv").read_text()
    rows = []
    for r in csv.DictReader(text.splitlines()):
        code = int(r["clc_code"])
        if 111 <= code <= 523:
            rgb = (int(r["red"]), int(r["green"]), int(r["blue"]))
            rows.append(
                ClcEntry(int(r["grid_code"]), code, r["label1"], r["label2"], r["label3"], rgb)
            )
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
        raise LcflowError(
            f"{where}: the CORINE raster mixes grid codes (1..44: {_listed(as_grid)}) and CLC codes "
            f"(111..523: {_listed(as_clc)})"
        )
    coding = "clc" if as_clc else "grid"
    unknown = present - (clc | CLC_NOT_A_CLASS if coding == "clc" else grid | GRID_NOT_A_CLASS)
    if unknown:
        kind = "CLC codes 111..523" if coding == "clc" else "grid codes 1..44"
        raise LcflowError(
            f"{where}: value(s) {_listed(unknown)} of the CORINE raster are not CORINE codes "
            f"(read as {kind}; declare fill values as the raster's nodata)"
        )
    return coding


def _listed(values: set[int], n: int = 10) -> str:
    v = sorted(values)
    return ", ".join(map(str, v[:n])) + (f" ... ({len(v)} values)" if len(v) > n else "")


def clc_codes_from_raster(
    values: np.ndarray, nodata: float | None = None, where: str = "CORINE raster"
) -> np.ndarray:
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
    """Source code -> class code, with class names and colours.

    Source codes are CLC level-3 codes for CORINE, or the codes of the user's own reference data;
    ``ignored`` lists source codes that are known and deliberately left unlabelled.
    """

    name: str
    mapping: dict[int, int]
    names: dict[int, str]
    colors: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    ignored: frozenset[int] = frozenset()

    @property
    def codes(self) -> list[int]:
        return sorted(self.names)

    @property
    def dtype(self) -> str:
        return "uint8" if max(self.codes) < 255 else "uint16"

    @property
    def nodata(self) -> int:
        return 255 if self.dtype == "uint8" else 65535

    def apply(self, codes: np.ndarray, chunk: int = 1 << 22) -> np.ndarray:
        """Map source codes to class codes; unmapped, ignored and negative (no label) become nodata.

        Done in chunks, so the temporaries of a whole tile stay small."""
        codes = np.asarray(codes)
        keys = np.array(sorted(self.mapping), dtype=np.int64)
        values = np.array([self.mapping[k] for k in keys], dtype=np.int64)
        out = np.empty(codes.shape, dtype=self.dtype)
        flat_in, flat_out = codes.reshape(-1), out.reshape(-1)
        for i in range(0, flat_in.size, chunk):
            part = flat_in[i : i + chunk].astype(np.int64)
            pos = np.clip(np.searchsorted(keys, part), 0, len(keys) - 1)
            flat_out[i : i + chunk] = np.where(keys[pos] == part, values[pos], self.nodata)
        return out

    def unmapped(self, present: dict[int, int]) -> dict[int, int]:
        """Of the source codes present (code -> pixel or feature count), those neither mapped nor ignored."""
        return {
            c: n
            for c, n in sorted(present.items())
            if c not in self.mapping and c not in self.ignored
        }

    def check_covers(self, present: dict[int, int], where: str) -> None:
        """Every source code present in an area is mapped or explicitly ignored, else one line listing the others."""
        missing = self.unmapped(present)
        if missing:
            listed = ", ".join(f"{c} ({n})" for c, n in list(missing.items())[:20])
            more = f" ... ({len(missing)} codes)" if len(missing) > 20 else ""
            raise LcflowError(
                f"{where}: code(s) {listed}{more} (count in brackets) are neither mapped nor ignored by "
                f"the nomenclature {self.name!r}; map them to a class or list them as ignored"
            )


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


#: the value of ``class_code`` (CSV) that marks a source code as known and deliberately left unlabelled
IGNORE = "ignore"


@dataclass(frozen=True)
class _Row:
    """One source code's entry in a mapping file, with where it was written (for the messages)."""

    code: int
    class_code: int | None  # None: ignored
    class_name: str
    color: tuple[int, int, int] | None
    at: str


def from_mapping_file(path: str | Path, clc_codes: bool = True) -> Nomenclature:
    """A custom nomenclature from a CSV or YAML mapping file, validated as a whole.

    CSV: columns ``clc_code`` (or ``code``), ``class_code`` (or ``ignore``), ``class_name`` and optional
    ``red``, ``green``, ``blue``. YAML: ``classes`` (a list of ``class_code``, ``class_name``, ``codes``,
    optional ``color`` as [r, g, b] or ``"#rrggbb"``), optional ``ignore`` (codes) and ``name``.
    With ``clc_codes`` every source code must be a CLC level-3 code (the labels are CORINE); else they
    are the codes of the user's own reference data. Refused: a source code given twice, a class given
    two names or two colours, class codes outside 1..65534.
    """
    path = Path(path)
    if not path.exists():
        raise LcflowError(f"nomenclature mapping file {path} does not exist")
    if path.suffix.lower() in (".yaml", ".yml"):
        name, rows = _yaml_rows(path)
    else:
        name, rows = path.stem, _csv_rows(path)
    if not rows:
        raise LcflowError(f"{path}: no rows")
    known = {e.clc_code for e in clc_legend()}
    mapping: dict[int, int] = {}
    names: dict[int, str] = {}
    colors: dict[int, tuple[int, int, int]] = {}
    ignored: set[int] = set()
    first: dict[int, Any] = {}
    for r in rows:
        if clc_codes and r.code not in known:
            raise LcflowError(f"{r.at}: clc_code {r.code} is not a CLC level-3 code")
        if r.code in first:
            raise LcflowError(
                f"{r.at}: code {r.code} is given twice (also at {first[r.code].at.split(':', 1)[-1]})"
            )
        first[r.code] = r
        if r.class_code is None:
            ignored.add(r.code)
            continue
        if not 0 < r.class_code < 65535:
            raise LcflowError(f"{r.at}: class_code {r.class_code} must be within 1..65534")
        mapping[r.code] = r.class_code
        if names.setdefault(r.class_code, r.class_name) != r.class_name:
            raise LcflowError(
                f"{r.at}: class {r.class_code} is named {r.class_name!r} here and "
                f"{names[r.class_code]!r} before; one class, one name"
            )
        if r.color is not None and colors.setdefault(r.class_code, r.color) != r.color:
            raise LcflowError(
                f"{r.at}: class {r.class_code} has colour {r.color} here and {colors[r.class_code]} "
                "before; one class, one colour"
            )
    if not mapping:
        raise LcflowError(f"{path}: every code is ignored; map at least one to a class")
    return Nomenclature(name, mapping, names, colors, frozenset(ignored))


def _csv_rows(path: Path) -> list[_Row]:
    rows = []
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        columns = set(reader.fieldnames or [])
        code_col = "clc_code" if "clc_code" in columns else "code"
        missing = {code_col, "class_code", "class_name"} - columns
        if missing:
            raise LcflowError(
                f"{path}: missing column(s) {sorted(missing)} (clc_code or code, class_code, class_name; "
                f"found {sorted(columns)})"
            )
        for lineno, r in enumerate(reader, start=2):
            at = f"{path}:{lineno}"
            ignored = (r["class_code"] or "").strip().lower() == IGNORE
            try:
                code = int(r[code_col])
                class_code = None if ignored else int(r["class_code"])
                color = (
                    (int(r["red"]), int(r["green"]), int(r["blue"]))
                    if r.get("red") not in (None, "")
                    else None
                )
            except (TypeError, ValueError) as exc:
                raise LcflowError(
                    f"{at}: codes and colours must be integers, class_code may be {IGNORE!r} ({exc})"
                ) from exc
            rows.append(_Row(code, class_code, (r["class_name"] or "").strip(), color, at))
    return rows


def _yaml_rows(path: Path) -> tuple[str, list[_Row]]:
    import yaml

    from lcflow.common.yaml_files import DuplicateKey, strict_load

    try:
        data = strict_load(path.read_text())
    except DuplicateKey as exc:
        raise LcflowError(
            f"{path}: {exc}: YAML would keep the last one silently; give each key once"
        ) from None
    except yaml.YAMLError as exc:
        raise LcflowError(f"{path}: not YAML ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("classes"), list):
        raise LcflowError(
            f"{path}: expected a mapping with a list 'classes' (class_code, class_name, codes, color)"
        )
    unknown = set(data) - {"name", "classes", "ignore"}
    if unknown:
        raise LcflowError(f"{path}: unknown key(s) {sorted(unknown)} (name, classes, ignore)")
    rows = []
    for i, entry in enumerate(data["classes"]):
        at = f"{path}: classes[{i}]"
        if not isinstance(entry, dict) or {"class_code", "class_name", "codes"} - set(entry):
            raise LcflowError(f"{at}: needs class_code, class_name and codes")
        extra = set(entry) - {"class_code", "class_name", "codes", "color"}
        if extra:
            raise LcflowError(
                f"{at}: unknown key(s) {sorted(extra)} (class_code, class_name, codes, color)"
            )
        codes = entry["codes"] if isinstance(entry["codes"], list) else [entry["codes"]]
        if not codes or not all(_is_int(c) for c in codes) or not _is_int(entry["class_code"]):
            raise LcflowError(
                f"{at}: class_code and codes must be integers (codes a non-empty list)"
            )
        color = _color(entry.get("color"), at)
        rows += [
            _Row(int(c), int(entry["class_code"]), str(entry["class_name"]), color, at)
            for c in codes
        ]
    ignore = data.get("ignore") or []
    if not isinstance(ignore, list) or not all(_is_int(c) for c in ignore):
        raise LcflowError(f"{path}: ignore must be a list of integer codes")
    rows += [_Row(int(c), None, "", None, f"{path}: ignore") for c in ignore]
    return str(data.get("name") or path.stem), rows


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _color(value, at: str) -> tuple[int, int, int] | None:
    """[r, g, b] or "#rrggbb" as a tuple of 0..255."""
    if value is None:
        return None
    if isinstance(value, str) and len(value) == 7 and value.startswith("#"):
        try:
            r, g, b = (int(value[i : i + 2], 16) for i in (1, 3, 5))
            return r, g, b
        except ValueError:
            pass
    elif (
        isinstance(value, list)
        and len(value) == 3
        and all(_is_int(v) and 0 <= v <= 255 for v in value)
    ):
        return tuple(value)
    raise LcflowError(f"{at}: color {value!r} is neither [r, g, b] (0..255) nor '#rrggbb'")


def load(level: int = 2, mapping_file: str | None = None, clc_codes: bool = True) -> Nomenclature:
    """The configured nomenclature: a mapping file when given, else the CORINE level.

    ``clc_codes``: the mapping file maps CLC codes (False: the codes of the user's reference data)."""
    return from_mapping_file(mapping_file, clc_codes) if mapping_file else clc_level(level)
