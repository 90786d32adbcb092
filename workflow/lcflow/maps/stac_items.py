"""STAC Items for the products (class and confidence maps, change maps) and a static catalog of them.

Each Item sits beside its product (``maps/{tile}_{year}_{model}.stac.json``,
``changes/{tile}_{years}_{model}.stac.json``) with relative hrefs, and carries what a catalogue
user needs without opening the rasters: the projection (``proj:code``, shape, transform, bbox), the
raster bands (data type, nodata, resolution, unit), the classes (``classification:classes``: value,
name, description, colour hint), each file's size and SHA-256 multihash (``file:``), the model and its
weights' checksum, the source scenes (a ``derived_from`` link to the tile-year's STAC ItemCollection)
and the accuracy figures of the map's assessment. ``results/stac/catalog.json`` links every Item.
"""

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pystac
import rasterio
from pystac.extensions.classification import Classification, ClassificationExtension
from pystac.extensions.file import FileExtension
from pystac.extensions.projection import ProjectionExtension
from pystac.extensions.raster import DataType, RasterBand, RasterExtension
from rasterio.warp import transform_bounds, transform_geom
from shapely.geometry import box, mapping

from lcflow.common import evidence
from lcflow.common.atomic import write_text
from lcflow.errors import LcflowError
from lcflow.train.model_dirs.model_dir import sha256

COG = "image/tiff; application=geotiff; profile=cloud-optimized"


def _multihash(path: Path) -> str:
    """SHA-256 of a file as the multihash ``file:checksum`` expects (0x12 = sha2-256, 0x20 = 32 bytes)."""
    return "1220" + sha256(path)


def _slug(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z]+", "_", text).strip("_").lower() or "class"


def _period(years: list[int]) -> tuple[datetime, datetime]:
    return (
        datetime(min(years), 1, 1, tzinfo=timezone.utc),
        datetime(max(years), 12, 31, 23, 59, 59, tzinfo=timezone.utc),
    )


def _asset(
    item: pystac.Item,
    key: str,
    path: Path,
    title: str,
    roles: list[str],
    unit: str | None = None,
    classes: list[Classification] | None = None,
) -> None:
    """A COG asset with its raster band, classes and file size and checksum."""
    with rasterio.open(path) as ds:
        band = RasterBand.create(
            nodata=ds.nodata,
            data_type=DataType(ds.dtypes[0]),
            spatial_resolution=float(ds.res[0]),
            unit=unit,
        )
    asset = pystac.Asset(href=str(path), media_type=COG, title=title, roles=roles)
    item.add_asset(key, asset)
    RasterExtension.ext(asset, add_if_missing=True).bands = [band]
    files = FileExtension.ext(asset, add_if_missing=True)
    files.size, files.checksum = path.stat().st_size, _multihash(path)
    if classes:
        ClassificationExtension.ext(asset, add_if_missing=True).classes = classes


def _classes(path: Path, table: list[dict] | None = None) -> list[Classification]:
    """The classes of a class map (its ``class_names`` tag and colour table) or of a change map's table."""
    with rasterio.open(path) as ds:
        colors = ds.colormap(1)
        names = json.loads(ds.tags().get("class_names", "{}"))
    rows = table if table is not None else [{"code": int(c), "name": n} for c, n in names.items()]
    return [
        Classification.create(
            value=int(r["code"]),
            name=_slug(r["name"]),
            description=r["name"],
            color_hint="{:02X}{:02X}{:02X}".format(*colors.get(int(r["code"]), (0, 0, 0, 0))[:3]),
        )
        for r in rows
    ]


def _item(item_id: str, path: Path, years: list[int], properties: dict) -> pystac.Item:
    """An Item with the footprint (WGS 84) and projection of the raster at ``path``."""
    with rasterio.open(path) as ds:
        crs, bounds, shape, transform = ds.crs, ds.bounds, [ds.height, ds.width], ds.transform
    if crs is None or crs.to_epsg() is None:
        raise LcflowError(f"{path} has no EPSG CRS: a STAC Item needs one")
    footprint = transform_geom(crs, "EPSG:4326", mapping(box(*bounds)))
    start, end = _period(years)
    item = pystac.Item(
        item_id,
        footprint,
        list(transform_bounds(crs, "EPSG:4326", *bounds, densify_pts=21)),
        None,
        properties,
        start_datetime=start,
        end_datetime=end,
    )
    proj = ProjectionExtension.ext(item, add_if_missing=True)
    proj.code, proj.shape, proj.bbox = f"EPSG:{crs.to_epsg()}", shape, list(bounds)
    proj.transform = [transform.a, transform.b, transform.c, transform.d, transform.e, transform.f]
    return item


def map_item(
    map_path: Path,
    confidence: Path,
    tile: str,
    year: int,
    model_dir: Path,
    manifest: Path,
    assessment: Path | None = None,
    quicklook: Path | None = None,
) -> pystac.Item:
    """The Item of a class map and its confidence map.

    Args:
        map_path: the class map.
        confidence: its confidence map.
        tile: the MGRS tile.
        year: the year mapped.
        model_dir: the model that made it (its name, classes and training).
        manifest: the tile-year's scenes, the map's sources.
        assessment: its assessment (``lcflow assess``'s JSON), whose figures the item quotes; None: none.
        quicklook: its PNG, an asset of the item; None: none.
    """
    model = json.loads((model_dir / "model.json").read_text())
    props = {
        "lcflow:tile": tile,
        "lcflow:year": year,
        "lcflow:model": model["model"],
        "lcflow:model_weights_sha256": model["weights"]["sha256"],
    }
    with rasterio.open(map_path) as ds:
        consistency = ds.tags().get("consistency")
    if consistency:
        props["lcflow:consistency"] = json.loads(consistency)
    if assessment is not None:
        props["lcflow:accuracy"] = _accuracy(json.loads(assessment.read_text()))
    item = _item(map_path.stem, map_path, [year], props)
    _asset(item, "class", map_path, "land-cover classes", ["data"], classes=_classes(map_path))
    _asset(
        item,
        "confidence",
        confidence,
        "confidence of the class",
        ["data", "quality"],
        unit="percent",
    )
    if quicklook is not None:
        item.add_asset(
            "quicklook",
            pystac.Asset(
                str(quicklook),
                media_type=pystac.MediaType.PNG,
                title="classes and confidence",
                roles=["overview"],
            ),
        )
    item.add_link(
        pystac.Link(
            "derived_from",
            str(manifest),
            pystac.MediaType.JSON,
            "Sentinel-2 scenes the cube was built from (STAC ItemCollection)",
        )
    )
    item.add_link(
        pystac.Link(
            "via", str(model_dir / "model.json"), pystac.MediaType.JSON, "the trained model"
        )
    )
    if assessment is not None:
        item.add_link(
            pystac.Link(
                "describedby", str(assessment), pystac.MediaType.JSON, "accuracy assessment"
            )
        )
    return item


def _accuracy(result: dict) -> dict:
    """The figures of an assessment an item quotes: each part's overall accuracy, its interval and points."""
    accuracy = {}
    for part, name in (
        ("reference", "reference"),
        ("truth", "truth"),
        ("test_samples", "test_samples_agreement"),
    ):
        if part in result:  # a figure withheld for want of evidence travels as its reason
            accuracy[name] = {
                k: result[part][k]
                for k in ("overall_accuracy", "overall_accuracy_ci95", "points_used", evidence.KEY)
                if k in result[part]
            }
    return accuracy


def change_item(change_path: Path, tile: str, model: str, summary: Path) -> pystac.Item:
    """The Item of a change map between two years."""
    with rasterio.open(change_path) as ds:
        years = json.loads(ds.tags()["years"])
        table = json.loads(ds.tags()["change_classes"])
    pair = next(p for p in json.loads(summary.read_text())["pairs"] if p["years"] == years)
    props = {
        "lcflow:tile": tile,
        "lcflow:model": model,
        "lcflow:years": years,
        "lcflow:changed_fraction": pair["consistent"]["changed_fraction"],
        "lcflow:agreement": pair["consistent"]["agreement"],
    }
    item = _item(change_path.stem, change_path, years, props)
    _asset(
        item,
        "change",
        change_path,
        f"class change {years[0]} to {years[1]} (from-to codes)",
        ["data"],
        classes=_classes(change_path, table),
    )
    item.add_link(
        pystac.Link(
            "describedby", str(summary), pystac.MediaType.JSON, "change matrices and agreement"
        )
    )
    return item


def write_item(item: pystac.Item, path: str | Path, catalog_path: str | Path) -> None:
    """Write ``item`` at ``path`` with relative hrefs to its files, its sources and the catalog."""
    path, catalog_path = Path(path).resolve(), Path(catalog_path).resolve()
    item.set_self_href(str(path))
    for asset in item.assets.values():
        asset.href = pystac.utils.make_relative_href(str(Path(asset.href).resolve()), str(path))
    for link in item.links:
        if link.rel in ("derived_from", "via", "describedby"):
            link.target = pystac.utils.make_relative_href(
                str(Path(link.get_href()).resolve()), str(path)
            )
    item.remove_links(pystac.RelType.ROOT)
    item.remove_links(pystac.RelType.PARENT)
    catalog_href = pystac.utils.make_relative_href(str(catalog_path), str(path))
    for rel in (pystac.RelType.ROOT, pystac.RelType.PARENT):
        item.add_link(pystac.Link(rel, catalog_href, pystac.MediaType.JSON))
    write_text(
        path, json.dumps(item.to_dict(include_self_link=False, transform_hrefs=False), indent=1)
    )


def write_catalog(item_paths: list[str | Path], catalog_path: str | Path, title: str) -> dict:
    """A static, self-contained catalog linking the Items at ``item_paths`` (written by :func:`write_item`)."""
    catalog_path = Path(catalog_path).resolve()
    links = [{"rel": "root", "href": "./catalog.json", "type": pystac.MediaType.JSON}]
    for p in item_paths:
        p = Path(p).resolve()
        item = json.loads(p.read_text())
        if item.get("type") != "Feature":
            raise LcflowError(f"{p} is not a STAC Item")
        links.append(
            {
                "rel": "item",
                "href": pystac.utils.make_relative_href(str(p), str(catalog_path)),
                "type": pystac.MediaType.GEOJSON,
                "title": item["id"],
            }
        )
    catalog = {
        "type": "Catalog",
        "id": "lcflow-products",
        "stac_version": pystac.get_stac_version(),
        "description": f"{title}: land-cover maps, their confidence and the change between years",
        "links": links,
    }
    write_text(catalog_path, json.dumps(catalog, indent=1))
    return catalog
