"""GeoTIFF/COG writing and the tile grid every stage shares."""

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import rasterio
import rasterio.errors
import rasterio.shutil
from affine import Affine
from rasterio.crs import CRS
from rasterio.windows import Window

from lcflow.common.atomic import publish_together, staging_dir

#: GDAL's COG driver writes pixel-interleaved files (time series in one read) from 3.11 on
_COG_INTERLEAVE = tuple(int(v) for v in rasterio.__gdal_version__.split(".")[:2]) >= (3, 11)


@dataclass(frozen=True)
class Grid:
    """A raster grid: CRS, affine transform, size. Stages agree on it instead of re-deriving it."""

    crs: CRS
    transform: Affine
    width: int
    height: int

    @classmethod
    def from_bounds(
        cls, crs: CRS | str | int, bounds: tuple[float, float, float, float], resolution: float
    ) -> "Grid":
        xmin, ymin, xmax, ymax = bounds
        width = int(round((xmax - xmin) / resolution))
        height = int(round((ymax - ymin) / resolution))
        crs = CRS.from_epsg(crs) if isinstance(crs, int) else CRS.from_user_input(crs)
        return cls(crs, Affine(resolution, 0, xmin, 0, -resolution, ymax), width, height)

    @classmethod
    def of(cls, path: str | Path) -> "Grid":
        with rasterio.open(path) as ds:
            return cls(ds.crs, ds.transform, ds.width, ds.height)

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        t = self.transform
        return (t.c, t.f + t.e * self.height, t.c + t.a * self.width, t.f)

    @property
    def resolution(self) -> float:
        return self.transform.a

    def describe(self) -> str:
        """The grid as a message names it: size, pixel, corner and CRS."""
        x0, _, _, y1 = self.bounds
        return f"{self.width} x {self.height} px of {self.resolution:g} from ({x0:g}, {y1:g}) in {self.crs}"

    def profile(self) -> dict[str, Any]:
        return {
            "crs": self.crs,
            "transform": self.transform,
            "width": self.width,
            "height": self.height,
        }

    def windows(self, block: int, order: str = "rows") -> Iterator[Window]:
        """Square windows of at most ``block`` pixels a side covering the grid, row by row, or in
        ``order="z"`` (Morton order: every aligned square of 2 x 2, 4 x 4, ... windows in a row, so that
        windows inside one tile of a source file, whatever its size, follow each other)."""
        cells = [
            (r, c)
            for r in range((self.height + block - 1) // block)
            for c in range((self.width + block - 1) // block)
        ]
        if order == "z":
            cells.sort(key=lambda rc: _interleaved(*rc))
        elif order != "rows":
            raise ValueError(f"window order {order!r}: rows or z")
        for r, c in cells:
            row, col = r * block, c * block
            yield Window(col, row, min(block, self.width - col), min(block, self.height - row))


def _interleaved(row: int, col: int) -> int:
    """The Morton code of (row, col): their bits interleaved."""
    code = 0
    for bit in range(max(row.bit_length(), col.bit_length())):
        code |= ((row >> bit) & 1) << (2 * bit + 1) | ((col >> bit) & 1) << (2 * bit)
    return code


def read_with_halo(
    ds: rasterio.io.DatasetReader, window: Window, halo: int, fill_value: float
) -> np.ndarray:
    """Every band of ``window`` grown by ``halo`` px each side; ``fill_value`` beyond the raster.

    The part inside the raster is read as a plain window and placed in an array of ``fill_value``: the
    values of rasterio's ``boundless`` read, which goes through a warped VRT and costs a whole-window warp
    even where the grown window lies inside (about 50 times the read of a 256 px window of 13 bands).
    """
    col, row = int(window.col_off) - halo, int(window.row_off) - halo
    width, height = int(window.width) + 2 * halo, int(window.height) + 2 * halo
    if col >= 0 and row >= 0 and col + width <= ds.width and row + height <= ds.height:
        return ds.read(window=Window(col, row, width, height))
    out = np.full((ds.count, height, width), fill_value, dtype=ds.dtypes[0])
    left, top = max(col, 0), max(row, 0)
    right, bottom = min(col + width, ds.width), min(row + height, ds.height)
    if right > left and bottom > top:
        out[:, top - row : bottom - row, left - col : right - col] = ds.read(
            window=Window(left, top, right - left, bottom - top)
        )
    return out


def colormap(colors: dict[int, tuple[int, int, int]]) -> dict[int, tuple[int, int, int, int]]:
    return {int(k): (*v, 255) for k, v in colors.items()}


def pam_categories(legend: dict[int, tuple[str, tuple[int, int, int]]]) -> str:
    """GDAL's auxiliary metadata (PAM) of a class map's band: its category names, one per value from 0."""
    from xml.sax.saxutils import escape

    names = [escape(legend[v][0]) if v in legend else "" for v in range(max(legend) + 1)]
    entries = "".join(f"      <Category>{n}</Category>\n" for n in names)
    return (
        f'<PAMDataset>\n  <PAMRasterBand band="1">\n    <CategoryNames>\n{entries}    </CategoryNames>\n'
        "  </PAMRasterBand>\n</PAMDataset>\n"
    )


def qgis_style(legend: dict[int, tuple[str, tuple[int, int, int]]], nodata: float | None) -> str:
    """A QGIS layer style (.qml) of a class map: a paletted renderer with each class's name and colour."""
    from xml.sax.saxutils import quoteattr

    entries = "".join(
        f'        <paletteEntry value="{code}" color="#{r:02x}{g:02x}{b:02x}" alpha="255" '
        f"label={quoteattr(f'{code} {name}')}/>\n"
        for code, (name, (r, g, b)) in sorted(legend.items())
    )
    transparent = (
        ""
        if nodata is None
        else (
            f'      <rasterTransparency><singleValuePixelList><pixelListEntry min="{nodata:g}" max="{nodata:g}" '
            'percentTransparent="100"/></singleValuePixelList></rasterTransparency>\n'
        )
    )
    return (
        "<!DOCTYPE qgis PUBLIC 'http://mrcc.com/qgis.dtd' 'SYSTEM'>\n"
        '<qgis version="3.28" styleCategories="Symbology">\n  <pipe>\n'
        '    <rasterrenderer type="paletted" band="1" opacity="1" alphaBand="-1" nodataColor="">\n'
        f"{transparent}      <colorPalette>\n{entries}      </colorPalette>\n    </rasterrenderer>\n"
        "  </pipe>\n</qgis>\n"
    )


class StagedCog:
    """A GeoTIFF being written beside its final path, made a COG by :meth:`finish`, not yet published.

    A class map (``legend``: code -> (name, colour)) also gets the two files GIS read a legend from beside
    it: ``{name}.aux.xml`` (GDAL's PAM: the band's category names, which gdalinfo lists) and ``{stem}.qml``
    (a QGIS style: the classes by name and colour, loaded with the layer)."""

    def __init__(
        self,
        final: Path,
        tmpdir: Path,
        dataset: rasterio.io.DatasetWriter,
        count: int,
        resampling: str,
        legend: dict[int, tuple[str, tuple[int, int, int]]] | None = None,
    ):
        self.final, self.tmpdir, self.dataset = final, tmpdir, dataset
        self._count, self._resampling, self._legend = count, resampling, legend

    def finished(self) -> list[tuple[Path, Path]]:
        """:meth:`finish` as (temporary, final) pairs to publish: the legend's files first, the COG last."""
        pairs = []
        if self._legend:
            pam, qml = self.tmpdir / "legend.aux.xml", self.tmpdir / "legend.qml"
            pam.write_text(pam_categories(self._legend))
            qml.write_text(qgis_style(self._legend, self.dataset.nodata))
            pairs += [
                (pam, self.final.with_name(self.final.name + ".aux.xml")),
                (qml, self.final.with_suffix(".qml")),
            ]
        return pairs + [(self.finish(), self.final)]

    def finish(self, cog: bool = True) -> Path:
        """Close the staging file and copy it as a COG with overviews; return the COG's temporary path,
        checked complete (:func:`check_complete`). ``cog=False`` keeps the tiled staging GeoTIFF as it is
        (intermediate rasters nobody views)."""
        stage = Path(self.dataset.name)
        self.dataset.close()
        if not cog:
            check_complete(stage, self.final)
            return stage
        check_complete(stage, self.final)
        published = self.tmpdir / "cog.tif"
        rasterio.shutil.copy(
            stage,
            published,
            driver="COG",
            compress="DEFLATE",
            overview_resampling=self._resampling,
            blocksize=256,
            BIGTIFF="IF_SAFER",
            **({"interleave": "PIXEL"} if self._count > 1 and _COG_INTERLEAVE else {}),
        )
        stage.unlink()
        check_complete(published, self.final)
        return published


def check_complete(path: Path, final: Path) -> None:
    """Refuse (naming ``final``) a GeoTIFF that is not whole (:func:`why_incomplete`).

    A write that fails as GDAL closes a file (the disk full while it flushes its blocks and directory)
    is said on stderr only, and leaves a file that opens and whose directory points past its end; every
    raster is checked so before it is published."""
    from lcflow.common.atomic import incomplete

    why = why_incomplete(path)
    if why:
        raise incomplete(final, why)


def why_incomplete(path: Path) -> str | None:
    """Why the GeoTIFF ``path`` is not whole, None where it is: GDAL cannot open it, a block's bytes lie
    past the file's end, or the last block of a band does not decode. The block table is GDAL's
    (``BLOCK_OFFSET_x_y``, ``BLOCK_SIZE_x_y`` of the TIFF domain), a few microseconds a block."""
    try:
        size = path.stat().st_size
        with rasterio.open(path) as ds:
            block_h, block_w = ds.block_shapes[0]
            rows, cols = -(-ds.height // block_h), -(-ds.width // block_w)
            interleaved = ds.interleaving is not None and ds.interleaving.name == "PIXEL"
            for band in [1] if interleaved else range(1, ds.count + 1):
                for r in range(rows):
                    for c in range(cols):
                        offset = int(
                            ds.get_tag_item(f"BLOCK_OFFSET_{c}_{r}", "TIFF", bidx=band) or 0
                        )
                        length = int(ds.get_tag_item(f"BLOCK_SIZE_{c}_{r}", "TIFF", bidx=band) or 0)
                        if offset + length > size:
                            return f"block {r},{c} of band {band} ends at byte {offset + length}, past the file's {size}"
            last = Window(
                (cols - 1) * block_w,
                (rows - 1) * block_h,
                ds.width - (cols - 1) * block_w,
                ds.height - (rows - 1) * block_h,
            )
            ds.read(window=last)
    except (OSError, rasterio.errors.RasterioError) as exc:
        return str(exc).replace(str(path), path.name)
    return None


#: ZSTD at level 1 writes the staging GeoTIFF several times faster than DEFLATE at the same size (the cube's
#: 120 int16 bands: 0.7 s against 3.7 s per megapixel, benchmarks/cube_whole_tile.py); GDAL >= 2.3 reads it
STAGING_COMPRESSION = {"compress": "zstd", "zstd_level": 1}
#: Band-interleaved staging files, each band's tiles apart. Against pixel interleaving, a 2048 px cube of
#: 120 int16 bands is written with a third less CPU, 15 % smaller (the predictor differences neighbours of
#: one band), and read 10-30 % faster by windows and 20 % faster pixel by pixel (a pixel's series is as
#: many bytes to decode either way: one pixel-interleaved tile or a tile of every band);
#: benchmarks/cube_layout.py
STAGING_INTERLEAVE = "band"


def staging_profile(
    grid: Grid, count: int, dtype: str, nodata: float | None = None
) -> dict[str, Any]:
    """rasterio's creation options of a staging GeoTIFF: 256 px tiles, band-interleaved, ZSTD with the
    predictor of its pixel type."""
    return dict(
        driver="GTiff",
        dtype=dtype,
        count=count,
        nodata=nodata,
        tiled=True,
        blockxsize=256,
        blockysize=256,
        interleave=STAGING_INTERLEAVE,
        **STAGING_COMPRESSION,
        predictor=3 if np.dtype(dtype).kind == "f" else 2,
        BIGTIFF="IF_SAFER",
        **grid.profile(),
    )


def _rgb(color) -> tuple[int, int, int]:
    red, green, blue = color
    return int(red), int(green), int(blue)


@dataclass(frozen=True)
class Bands:
    """What a raster's pixels hold: how many bands, of what type, the nodata value, and a name for each."""

    count: int
    dtype: str
    nodata: float | None = None
    descriptions: Sequence[str] = ()


@contextlib.contextmanager
def staged_cog(
    path: str | Path,
    grid: Grid,
    bands: Bands,
    *,
    colors: dict[int, tuple[int, int, int]] | None = None,
    names: dict[int, str] | None = None,
    tags: dict[str, Any] | None = None,
    resampling: str = "nearest",
) -> Iterator[StagedCog]:
    """A tiled staging GeoTIFF for windowed writes, in a hidden directory beside ``path`` that is removed
    on leaving, success or not (and by the next writer, should a killed job leave it).

    Args:
        path: the file to publish.
        grid: its grid.
        bands: its bands: count, data type, nodata value, names.
        colors: a colour table (class -> RGB) for a class map.
        names: the class names of a class map: its legend files go beside it (:class:`StagedCog`).
        tags: dataset tags; non-string values are stored as JSON (read them with :func:`read_tag`).
        resampling: how the COG's overviews are made.
    """
    final = Path(path)
    with staging_dir(final) as tmpdir:
        dst = rasterio.open(
            tmpdir / "stage.tif",
            "w",
            **staging_profile(grid, bands.count, bands.dtype, bands.nodata),
        )
        try:
            if colors:
                dst.write_colormap(1, colormap(colors))
            if tags:
                dst.update_tags(
                    **{k: v if isinstance(v, str) else json.dumps(v) for k, v in tags.items()}
                )
            for i, d in enumerate(bands.descriptions, start=1):
                dst.set_band_description(i, d)
            legend = (
                {int(c): (names[c], _rgb(colors.get(c, (0, 0, 0)))) for c in names}
                if names and colors
                else None
            )
            yield StagedCog(final, tmpdir, dst, bands.count, resampling, legend)
        finally:
            if not dst.closed:
                dst.close()


@contextlib.contextmanager
def cog_writer(
    path: str | Path, grid: Grid, bands: Bands, **options: Any
) -> Iterator[rasterio.io.DatasetWriter]:
    """Open a staging GeoTIFF for windowed writes; on success publish it as a COG at ``path``.

    Readers never see a partial file, and an error leaves nothing behind. Options as :func:`staged_cog`.
    """
    with staged_cog(path, grid, bands, **options) as staged:
        yield staged.dataset
        publish_together(staged.finished())


def write_cog(
    path: str | Path,
    data: np.ndarray,
    grid: Grid,
    *,
    nodata: float | None = None,
    descriptions: Sequence[str] = (),
    **options: Any,
) -> None:
    """Write a whole (bands, rows, cols) or (rows, cols) array as a COG.

    Args:
        path: the file to publish.
        data: the array; its type is the file's.
        grid: its grid.
        nodata: its nodata value; None: none.
        descriptions: a name for each band.
        **options: as :func:`staged_cog` takes them (colours, class names, tags, resampling).
    """
    arr = data[np.newaxis] if data.ndim == 2 else data
    with cog_writer(
        path, grid, Bands(arr.shape[0], arr.dtype.name, nodata, descriptions), **options
    ) as dst:
        dst.write(arr)


def read_tag(path: str | Path, key: str) -> Any:
    """A JSON tag written by :func:`write_cog`."""
    with rasterio.open(path) as ds:
        value = ds.tags().get(key)
    return None if value is None else json.loads(value)
