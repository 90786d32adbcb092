"""Products of tile-years and models a config no longer names (a dropped tile, year or model): Snakemake
neither updates nor removes them, and a person browsing ``maps/`` would take them for current. They are
listed, never removed here: some sit beside files a person made (a labelled reference), and which of them a
run made is for that person to say."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

#: the folders of a run's per-map products, named TILE_YEAR[_YEAR]_MODEL... (a tile's own: TILE_MODEL...)
PRODUCT_FOLDERS = ("maps", "maps/raw", "quicklooks", "assessment", "changes")
_NAME = re.compile(
    r"^(?P<tile>\d{2}[A-Z]{3})_(?:(?P<year>\d{4})(?:_(?P<to>\d{4}))?(?:_|$))?(?P<rest>[a-z].*)?$"
)


def find(
    results: Path, tiles: Iterable[str], years: Iterable[int], models: Iterable[str]
) -> dict[str, list[Path]]:
    """Per folder of ``results``, the products of a tile, year or model not among those given, and the
    tile-year folders of tiles or years not given."""
    tiles, years, models = set(tiles), {int(y) for y in years}, set(models) | {"blend"}
    found: dict[str, list[Path]] = {}
    for name in PRODUCT_FOLDERS:
        folder = results / name
        if not folder.is_dir():
            continue
        for path in sorted(p for p in folder.iterdir() if p.is_file()):
            m = _NAME.match(path.name)
            if m and (
                m["tile"] not in tiles
                or (m["year"] and not {int(m["year"]), int(m["to"] or m["year"])} <= years)
                or (m["rest"] and _model(m["rest"], models))
            ):
                found.setdefault(name, []).append(path)
    if results.is_dir():
        for year_dir in sorted(results.glob("[0-9][0-9][A-Z][A-Z][A-Z]/[0-9][0-9][0-9][0-9]")):
            if year_dir.is_dir() and (
                year_dir.parent.name not in tiles or int(year_dir.name) not in years
            ):
                found.setdefault("TILE/YEAR", []).append(year_dir)
    return found


def _model(rest: str, models: set[str]) -> bool:
    """Whether the name after its tile-year (``lstm_confidence.tif``, ``rf.quicklook.png``) is of no
    configured model."""
    return not any(rest == m or rest.startswith((f"{m}_", f"{m}.")) for m in models)


def said(results: Path, found: dict[str, list[Path]]) -> str | None:
    """One line naming them by folder, with an example, or None where there are none."""
    if not found:
        return None
    counts = ", ".join(f"{name} {len(paths)}" for name, paths in found.items())
    example = next(iter(found.values()))[0]
    return (
        f"lcflow: note: {results} holds products of tiles, years or models this config does not name "
        f"({counts}; e.g. {example}): this run neither updates nor removes them; remove them by hand where "
        "they are a dropped tile's"
    )
