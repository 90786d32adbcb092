"""Stage-in: a tile-year's scene files fetched onto the shared file system, where the network is.

On most HPC sites compute nodes have no route to the internet: ``lcflow stage`` runs on the login node
(or a data-mover partition), fetches the assets a cube reads (the configured bands and SCL of every item,
never a whole item's assets) into a folder of the shared file system, and writes a manifest whose hrefs are
the local copies; the cube's Slurm job reads that manifest and local files alone. Local assets are
referenced where they are (``stage.mode: fetch`` copies them too). The disk budget is checked before any byte
is fetched.
"""

import hashlib
import json
import logging
import re
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlsplit

from lcflow.common.atomic import write_text, writer_lock
from lcflow.common.progress import amount
from lcflow.errors import LcflowError
from lcflow.retrieve import area_copy, remote
from lcflow.retrieve.download import Asset, Fetcher
from lcflow.retrieve.search import manifest_source, read_manifest
from lcflow.retrieve.stage_checks import (
    check_apart,
    check_own,
    check_unique,
    file_size,
    layout_shape,
    stage_dir,
)
from lcflow.retrieve.stage_ledger import Ledger, ledger_of
from lcflow.retrieve.stage_settings import StageSettings
from lcflow.retrieve.transfer_rate import Rate

if TYPE_CHECKING:
    from lcflow.retrieve.cube_settings import CubeSettings

log = logging.getLogger("lcflow")

#: free bytes kept beyond what a stage-in stores (other jobs write to the same file system)
MARGIN_BYTES = 1 << 30
#: the field of a staged manifest's asset that lcflow stage copied (what the files are is the ledger's word:
#: :mod:`lcflow.retrieve.stage_ledger`)
STAGED = "lcflow:staged"
#: characters of an item id or asset key kept as they are in a staged file's name
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: the longest item id or asset key kept whole in a file name (file systems allow 255 bytes a name)
_LONGEST_NAME = 100


def safe_name(text: str) -> str:
    """``text`` as one file name: no separator, no ``..``, no leading dot; a name changed or shortened
    ends in a hash of ``text``, so two ids never share one (``a:b`` and ``a_b`` stay apart)."""
    name = _SAFE.sub("_", text).lstrip(".")
    if name == text and 0 < len(name) <= _LONGEST_NAME:
        return name
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{name[: _LONGEST_NAME - 13] or '_'}-{digest}"


def suffix(href: str) -> str:
    """The file suffix of an href (``.tif``, ``.jp2``), ``.tif`` where it has none."""
    found = Path(urlsplit(href).path).suffix
    return found if re.fullmatch(r"\.[A-Za-z0-9]{1,5}", found or "") else ".tif"


class Staged(NamedTuple):
    """An asset to stage, the item and key it is of, and its STAC fields."""

    item_id: str
    key: str
    asset: Asset
    fields: dict


def cube_settings(cube: "CubeSettings | list[str]") -> "CubeSettings":
    """The cube a stage-in fetches for: its settings, or (its bands) the defaults with those bands."""
    from lcflow.retrieve.cube_settings import CubeSettings

    return cube if isinstance(cube, CubeSettings) else CubeSettings(bands=tuple(cube))


def plan(
    items,
    tile: str,
    year: int,
    cube: "CubeSettings | list[str]",
    folder: Path,
    copy_local: bool = False,
) -> list[Staged]:
    """The assets of ``items`` a cube reads (those of its bands and its mask), with the local copy of each
    under ``folder/tile/year/item``.

    Args:
        items: the tile-year's items.
        tile: the MGRS tile.
        year: the year.
        cube: the cube's settings (its bands' and mask's assets are staged, no other), or its bands.
        folder: the stage-in's folder (``stage.dir``).
        copy_local: copy local assets too (else they are left out, and read where they are).
    """
    from lcflow.retrieve.cube import check_items

    layout = check_items(items, tile, year, cube_settings(cube))
    assets = []
    for item in items:
        for key in layout.keys:
            asset = item.assets[key]
            href = str(asset.href)
            if href.startswith("s3://"):
                raise LcflowError(
                    f"tile {tile} {year}: item {item.id} asset {key} is on S3 ({remote.redact(href)}), "
                    "which lcflow stage does not fetch: set stage.mode: remote"
                )
            if not copy_local and not remote.is_url(href):
                continue
            assets.append(
                Staged(
                    item.id,
                    key,
                    fields=asset.extra_fields,
                    asset=Asset(
                        what=f"tile {tile} {year}: item {item.id} asset {key}",
                        href=href,
                        dest=folder
                        / tile
                        / str(year)
                        / safe_name(item.id)
                        / f"{safe_name(key)}{suffix(href)}",
                        size=file_size(
                            asset.extra_fields, f"tile {tile} {year}: item {item.id} asset {key}"
                        ),
                        checksum=asset.extra_fields.get("file:checksum"),
                        shape=layout_shape(asset.extra_fields),
                    ),
                )
            )
    check_unique([(s.item_id, s.key, s.asset.dest) for s in assets], tile, year)
    return assets


def _present(asset: Asset) -> int:
    """Bytes of ``asset`` on disk already: the whole file, or the part received so far."""
    for path in (asset.dest, asset.part):
        if path.exists():
            return path.stat().st_size
    return 0


def _free_bytes(folder: Path) -> int:
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return shutil.disk_usage(existing).free


def budget(
    assets: list[Asset], size: Callable[[Asset], int], folder: Path, what: str, connections: int
) -> int:
    """The bytes the stage-in stores; refused in one line, before any download, where the file system
    holding ``folder`` has not that much free (beyond MARGIN_BYTES).

    Args:
        assets: the files to stage; those there already count nothing.
        size: an asset's size in bytes (STAC's ``file:size``, else a HEAD request).
        folder: where they go.
        what: the tile-year, named in the messages.
        connections: how many sizes are asked for at a time.
    """

    def stored(
        asset: Asset,
    ) -> int:  # a staged file is whole: no request for it (the server may be gone)
        return asset.dest.stat().st_size if asset.dest.exists() else size(asset)

    with ThreadPoolExecutor(max(1, connections)) as pool:
        sizes = list(pool.map(stored, assets))
    total = sum(sizes)
    needed = total - sum(min(_present(a), s) for a, s in zip(assets, sizes))
    free = _free_bytes(folder)
    log.info(
        "%s: %d files, %s, %s of them to fetch; %s free in %s",
        what,
        len(assets),
        amount(total),
        amount(needed),
        amount(free),
        folder,
    )
    if needed + MARGIN_BYTES > free:
        raise LcflowError(
            f"{what}: staging needs {amount(needed)} more (and {amount(MARGIN_BYTES)} to spare) "
            f"in {folder}, whose file system has {amount(free)} free: free space or set stage.dir "
            "to a larger file system"
        )
    return total


class _Plan(NamedTuple):
    """A stage-in checked and budgeted: its files, fetcher and bytes, before any download."""

    staged: list[Staged]
    fetcher: Fetcher
    total: int
    folder: Path
    what: str


def _planned(
    manifest: str | Path,
    tile: str,
    year: int,
    cube: "CubeSettings | list[str]",
    settings: StageSettings,
    network: remote.Network,
    bounds: tuple[float, float, float, float] | None,
) -> _Plan:
    """The files of ``tile``/``year`` to stage and what they will store, refused in one line where the
    mode stages nothing, the manifest is empty, credentials would reach another host, or the disk is short."""
    if settings.mode == "remote":
        raise LcflowError(
            "stage.mode is remote: nothing is staged (the cube's jobs read the scenes over the network)"
        )
    folder = stage_dir(settings.dir)
    what = f"stage {tile} {year}"
    items = read_manifest(manifest)
    if not items:
        raise LcflowError(f"manifest {manifest} lists no items")
    check_apart(items, manifest, folder)
    staged = plan(items, tile, year, cube, folder, copy_local=settings.mode == "fetch")
    check_own([s.asset.dest for s in staged], Ledger(folder / tile / str(year)), what)
    assets = [s.asset for s in staged]
    remote.check_credentials_reach(((a.what, a.href) for a in assets), manifest_source(manifest))
    fetcher = Fetcher(network, settings.connections, remote.signer(network.signing, items))
    fields = {s.asset.href: s.fields for s in staged}
    size = (lambda a: area_copy.estimate_bytes(fields[a.href], bounds)) if bounds else fetcher.size
    total = budget(assets, size, folder, what, settings.connections) if assets else 0
    return _Plan(staged, fetcher, total, folder, what)


def dry_run(
    manifest: str | Path,
    tile: str,
    year: int,
    cube: "CubeSettings | list[str]",
    settings: StageSettings | None = None,
    *,
    network: remote.Network | None = None,
    bounds: tuple[float, float, float, float] | None = None,
) -> int:
    """Say what the stage-in of ``tile``/``year`` would store and check the disk budget, fetching and writing
    nothing; the number of files it would stage.

    Args:
        manifest: the tile-year's items (``lcflow search``'s manifest).
        tile: the MGRS tile.
        year: the year.
        cube: the cube's settings (or its bands): what of each item it reads.
        settings: the config's ``stage`` section (:func:`run`); None: the schema's defaults.
        network: how sizes are asked for (HEAD requests where STAC gives none); None: the schema's defaults.
        bounds: the configured area in the tile's CRS: only the internal tiles over it are counted.
    """
    planned = _planned(
        manifest,
        tile,
        year,
        cube,
        settings or StageSettings(),
        network or remote.Network(),
        bounds,
    )
    log.info(
        "%s: dry run: %d files, %s in %s; nothing fetched",
        planned.what,
        len(planned.staged),
        amount(planned.total),
        planned.folder / tile / str(year),
    )
    return len(planned.staged)


def run(
    manifest: str | Path,
    tile: str,
    year: int,
    cube: "CubeSettings | list[str]",
    out: str | Path,
    settings: StageSettings | None = None,
    *,
    network: remote.Network | None = None,
    bounds: tuple[float, float, float, float] | None = None,
) -> int:
    """Fetch what the cube of ``tile``/``year`` reads into ``settings.dir`` and write the manifest ``out`` whose
    hrefs are the local copies; the number of files staged. Files already staged are kept as they are.

    Args:
        manifest: the tile-year's items (``lcflow search``'s manifest).
        tile: the MGRS tile.
        year: the year.
        cube: the cube's settings (or its bands): what of each item it reads.
        out: the manifest of the local copies to write.
        settings: the config's ``stage`` section: the folder (files go under ``TILE/YEAR/ITEM``), the files
            fetched at a time, and whether local assets are copied too (``mode: fetch``); None: the
            schema's defaults.
        network: timeouts, retries and the signing of URLs at download time; None: the schema's defaults.
        bounds: the configured area in the tile's CRS: only each file's internal tiles over it are
            fetched (area_copy). None: whole files.
    """
    network, settings = network or remote.Network(), settings or StageSettings()
    planned = _planned(manifest, tile, year, cube, settings, network, bounds)
    staged, fetcher, folder, what = planned.staged, planned.fetcher, planned.folder, planned.what
    rate = Rate(what, len(staged), planned.total)
    ledger = Ledger(folder / tile / str(year))
    errors: list[LcflowError] = []
    grids: dict[tuple[str, str], tuple[list[int], list[float]]] = {}

    def one(s: Staged) -> None:
        try:
            if bounds is None:
                fetcher.fetch(s.asset, rate, ledger)
                return
            if not s.asset.dest.exists():
                area_copy.copy_area(
                    s.asset.href,
                    s.asset.dest,
                    bounds,
                    network,
                    fetcher.sign,
                    s.asset.what,
                    s.fields,
                    ledger.record,
                )
            grids[(s.item_id, s.key)] = area_copy.grid_of(s.asset.dest)
            rate.add(s.asset.dest.stat().st_size, 1)
        except LcflowError as exc:
            log.error("%s", exc)
            errors.append(exc)

    # one stage-in a tile-year at a time: two would append to the same partial files
    with writer_lock(folder / tile / str(year)), ThreadPoolExecutor(settings.connections) as pool:
        try:
            list(pool.map(one, staged))
        except KeyboardInterrupt:
            fetcher.stop.set()  # the transfers in flight end within a chunk, their partial files kept
            pool.shutdown(wait=True, cancel_futures=True)
            log.error("%s: interrupted; the partial files are kept, and a rerun resumes them", what)
            raise
    if errors:
        more = f" ({len(errors) - 1} more above)" if len(errors) > 1 else ""
        raise LcflowError(f"{errors[0]}{more}")
    write_text(out, json.dumps(staged_manifest(manifest, staged, grids), indent=1))
    log.info(
        "%s: %d files in %s (%s received this run) -> %s",
        what,
        len(staged),
        folder / tile / str(year),
        amount(rate.received),
        out,
    )
    return len(staged)


def staged_manifest(
    manifest: str | Path,
    staged: list[Staged],
    grids: dict[tuple[str, str], tuple[list[int], list[float]]] | None = None,
) -> dict:
    """``manifest``'s items with each staged asset's href its local copy (and, for a copy of an area, its
    own ``proj:shape`` and ``proj:transform``: ``grids``), and the remote assets a cube does not read left
    out (no job reads the network by mistake)."""
    data = json.loads(Path(manifest).read_text())
    local = {(s.item_id, s.key): str(s.asset.dest) for s in staged}
    grids = grids or {}

    def copied(item_id: str, key: str, asset: dict) -> dict:
        if (item_id, key) not in local:  # a local asset read where it is: the user's file
            return {k: v for k, v in asset.items() if k != STAGED}
        asset = {**asset, "href": local[(item_id, key)], STAGED: True}
        if (item_id, key) in grids:
            asset["proj:shape"], asset["proj:transform"] = grids[(item_id, key)]
        return asset

    for feature in data["features"]:
        feature["assets"] = {
            key: copied(feature["id"], key, asset)
            for key, asset in feature["assets"].items()
            if (feature["id"], key) in local or not remote.is_url(str(asset["href"]))
        }
    data[STAGED] = True
    return data


def remove_staged(manifest: str | Path, folder: str | Path) -> int:
    """Remove the files of ``manifest`` that a stage-in into ``folder`` wrote (its ledgers say which), and the
    folders left empty; the number removed. Any other file, a local asset read in place or a user's file
    where a staged one would be, is never touched, whatever the manifest's fields say."""
    folder = Path(folder).absolute()
    ledgers: dict[Path, Ledger] = {}  # each read once, however many of its files the manifest names
    removed: dict[Path, tuple[Ledger, list[Path]]] = {}
    for item in read_manifest(manifest):
        for asset in item.assets.values():
            path = Path(str(asset.href)).absolute()
            ledger = ledger_of(path, folder)
            if ledger is None:
                continue
            ledger = ledgers.setdefault(ledger.path, ledger)
            if not ledger.wrote(path):
                continue
            path.unlink()
            removed.setdefault(ledger.path, (ledger, []))[1].append(path)
            for parent in path.parents:
                if parent == ledger.folder or any(parent.iterdir()):
                    break
                parent.rmdir()
    for ledger, paths in removed.values():
        ledger.forget(paths)
        for parent in [ledger.folder, *ledger.folder.parents]:
            if parent == folder or not parent.is_relative_to(folder) or any(parent.iterdir()):
                break
            parent.rmdir()
    count = sum(len(paths) for _, paths in removed.values())
    log.info("removed %d staged files of %s from %s", count, manifest, folder)
    return count
