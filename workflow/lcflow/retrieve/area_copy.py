"""Stage-in of an area smaller than a tile: of each scene file, only the internal tiles over the area.

A COG is read through GDAL's /vsicurl/ (HTTP range requests for the tiles a window covers, GDAL's own
retries and timeouts: remote.Network), and the window, widened to whole internal tiles, is written as a
local tiled GeoTIFF on the source's pixel grid, so the cube reads it as it would read the source. The
staged manifest gives each copy its own ``proj:shape`` and ``proj:transform``.
"""

import logging
import math
from collections.abc import Callable
from pathlib import Path

from affine import Affine

from lcflow.common.atomic import atomic_path
from lcflow.errors import LcflowError
from lcflow.retrieve import remote
from lcflow.retrieve.asset_reader import FileFacts
from lcflow.retrieve.scene_files import differs_from_item

log = logging.getLogger("lcflow")


def window_on(
    transform: Affine,
    shape: tuple[int, int],
    block: tuple[int, int],
    bounds: tuple[float, float, float, float],
) -> tuple[int, int, int, int] | None:
    """(row, col, height, width) of the whole internal tiles (``block``: rows, cols) of a raster of
    ``shape`` on ``transform`` that cover ``bounds``; None where the raster does not reach them."""
    xmin, ymin, xmax, ymax = bounds
    inverse = ~transform
    cols, rows = zip(
        *(inverse * (x, y) for x, y in ((xmin, ymax), (xmax, ymin), (xmin, ymin), (xmax, ymax)))
    )
    r0 = max(0, math.floor(min(rows) / block[0]) * block[0])
    c0 = max(0, math.floor(min(cols) / block[1]) * block[1])
    r1 = min(shape[0], math.ceil(max(rows) / block[0]) * block[0])
    c1 = min(shape[1], math.ceil(max(cols) / block[1]) * block[1])
    return (r0, c0, r1 - r0, c1 - c0) if r1 > r0 and c1 > c0 else None


def estimate_bytes(asset: dict, bounds: tuple[float, float, float, float]) -> int:
    """The most a copy of ``bounds`` of an asset (its STAC fields) stores: its pixels at 2 bytes, from its
    ``proj:transform`` (a 10 m band's pixel where the item gives none), uncompressed."""
    transform = asset.get("proj:transform") or [10, 0, 0, 0, -10, 0]
    area = (bounds[2] - bounds[0]) * (bounds[3] - bounds[1])
    return int(area / abs(transform[0] * transform[4]) * 2) + (1 << 16)


def copy_area(
    href: str,
    dest: Path,
    bounds: tuple[float, float, float, float],
    network: remote.Network,
    sign: Callable[[str], str] | None,
    what: str,
    fields: dict | None = None,
    record: Callable[[Path, Path], None] | None = None,
) -> tuple[list[int], list[float]]:
    """Write the internal tiles of ``href`` over ``bounds`` to ``dest`` (atomically, checked whole);
    its ``proj:shape`` and ``proj:transform``. A source its item's fields do not describe is cut on its own
    grid, with a WARNING (as the cube reads such a file: :mod:`lcflow.retrieve.scene_files`).

    Args:
        href: the remote raster (a cloud-optimised GeoTIFF), read through GDAL's /vsicurl/.
        dest: the local tiled GeoTIFF to write, on the source's grid.
        bounds: xmin, ymin, xmax, ymax in the source's CRS: the area whose internal tiles are copied.
        network: GDAL's timeouts and retries for the reads.
        sign: signs ``href`` before it is opened (None: read as it is).
        what: the item and asset, named in every message.
        fields: the asset's STAC fields (``proj:shape``, ``proj:transform``), checked against the source.
        record: called with the checked copy and ``dest`` just before the rename (the stage-in's ledger).
    """
    import rasterio
    from rasterio.windows import Window

    from lcflow.common import raster

    try:
        with remote.gdal_env(network), rasterio.open(sign(href) if sign else href) as src:
            why = differs_from_item(FileFacts.of(src), fields or {})
            if why:
                log.warning(
                    "%s: %s; its tiles over the area are cut on the file's own grid", what, why
                )
            found = window_on(src.transform, (src.height, src.width), src.block_shapes[0], bounds)
            if found is None:
                raise LcflowError(
                    f"{what} ({remote.redact(href)}) does not reach the area {list(bounds)}"
                )
            row, col, height, width = found
            window = Window(col, row, width, height)
            data = src.read(1, window=window)
            transform = src.window_transform(window)
            tags, scale, offset, description = (
                src.tags(),
                src.scales[0],
                src.offsets[0],
                src.descriptions[0],
            )
            block_h, block_w = src.block_shapes[0]
            profile = {
                "driver": "GTiff",
                "width": width,
                "height": height,
                "count": 1,
                "dtype": src.dtypes[0],
                "crs": src.crs,
                "transform": transform,
                "nodata": src.nodata,
                "compress": "deflate",
                **(
                    {"tiled": True, "blockxsize": block_w, "blockysize": block_h}
                    if block_w % 16 == 0
                    and block_h % 16 == 0
                    and block_w < width
                    and block_h < height
                    else {}
                ),
            }
    except rasterio.errors.RasterioError as exc:
        raise LcflowError(
            f"{what} ({remote.redact(href)}): reading its tiles over the area failed: "
            f"{remote.redact(str(exc))}"
        ) from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(dest) as tmp:
        with rasterio.open(
            tmp, "w", **profile
        ) as out:  # the pixels, and what the file says of them
            out.write(data, 1)
            out.update_tags(**tags)
            out.scales, out.offsets = (scale,), (offset,)
            if description:
                out.set_band_description(1, description)
        why = raster.why_incomplete(tmp)
        if why:
            raise LcflowError(f"{what}: the copy of its tiles over the area is not whole ({why})")
        if record:
            record(tmp, dest)
    return [height, width], list(transform)[:6]


def grid_of(path: Path) -> tuple[list[int], list[float]]:
    """``proj:shape`` and ``proj:transform`` of a local raster."""
    import rasterio

    with rasterio.open(path) as src:
        return [src.height, src.width], list(src.transform)[:6]
