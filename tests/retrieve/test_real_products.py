"""Real Sentinel-2 products written by others, as they come: a real Earth Search scene (decimated, its item
describing the full-resolution files) and two real sen2cor stacks of 11 bands in one file. Every cube value
checked against the source's DN x scale + offset at map coordinates, every mask against the source's SCL."""

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pystac
import pytest
import rasterio
from rasterio.warp import Resampling, reproject

from lcflow.errors import LcflowError
from lcflow.retrieve import cube, search, stage_in
from lcflow.retrieve.cube_settings import CubeSettings
from lcflow.retrieve.stage_settings import StageSettings

from ..http_server import serve

DATA = Path(__file__).resolve().parents[1] / "data"
ES = DATA / "earth_search_S2A_29RKH_20200219_crop"
ES_TILE, ES_AOI = "29RKH", [283980.0, 2773620.0, 309780.0, 2799420.0]
ES_BANDS = {"B02": "blue", "B03": "green", "B04": "red", "B08": "nir", "B11": "swir16", "SCL": "scl"}
SEN2R = DATA / "sen2r_barbellino_l2a"
SEN2R_TILE, SEN2R_AOI = "32TNS", [580560.0, 5101700.0, 580800.0, 5102120.0]
SEN2R_ORDER = ["B01", "B02", "B03", "B04", "B05", "B06", "B07", "B08", "B8A", "B11", "B12"]


def _earth_search_catalogue(folder: Path) -> Path:
    """Earth Search's own item, its COG assets the cut files beside it (relative hrefs, so that the same
    catalogue is read from disk and over HTTP); its other assets (JP2 on S3, metadata) left as they are."""
    item = json.loads((ES / "S2A_29RKH_20200219_0_L2A.json").read_text())
    (folder / item["id"]).mkdir(parents=True)
    for band, key in ES_BANDS.items():
        shutil.copy(ES / f"{band}.tif", folder / item["id"] / f"{band}.tif")
        item["assets"][key]["href"] = f"./{band}.tif"
    item["links"] = [{"rel": "root", "href": "../catalog.json"}, {"rel": "parent", "href": "../catalog.json"}]
    (folder / item["id"] / "item.json").write_text(json.dumps(item))
    (folder / "catalog.json").write_text(json.dumps({
        "type": "Catalog", "stac_version": "1.0.0", "id": "es", "description": "a real Earth Search scene",
        "links": [{"rel": "root", "href": "./catalog.json"}, {"rel": "item", "href": f"./{item['id']}/item.json"}]}))
    return folder / "catalog.json"


def _source(band: str, bounds=None) -> tuple[np.ndarray, rasterio.Affine]:
    with rasterio.open(ES / f"{band}.tif") as src:
        return src.read(1), src.transform


def _at(values: np.ndarray, transform, x: float, y: float):
    col, row = ~transform * (x, y)
    return values[int(row), int(col)]


ES_SETTINGS = CubeSettings(bands=tuple(b for b in ES_BANDS if b != "SCL"), resolution=100, dilation_px=0, block_px=64,
                           read_threads=2)


def _cube(manifest: Path, out: Path, settings: CubeSettings = ES_SETTINGS, tile=ES_TILE, aoi=ES_AOI, year=2020):
    cube.run(manifest, tile, year, out / "cube.tif", out / "valid.tif", settings, bounds=aoi)
    with rasterio.open(out / "cube.tif") as ds, rasterio.open(out / "valid.tif") as valid:
        steps = len(json.loads(ds.tags()["time_steps"]))
        return (ds.read().reshape(steps, len(settings.bands), ds.height, ds.width), valid.read(), ds.transform,
                ds.tags())


@pytest.fixture(scope="module")
def es_cubes(tmp_path_factory):
    """The scene's cube three ways: searched in the catalogue on disk, staged (area copies), read over HTTP."""
    root = tmp_path_factory.mktemp("earth_search")
    catalogue = _earth_search_catalogue(root / "catalogue")
    logger, records = logging.getLogger("lcflow"), []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger.addHandler(handler)
    try:
        made = {}
        search.run(ES_TILE, 2020, root / "items.json", catalog=str(catalogue))
        (root / "local").mkdir()
        made["local"] = _cube(root / "items.json", root / "local")
        stage_in.run(root / "items.json", ES_TILE, 2020, ES_SETTINGS, root / "staged.json",
                     StageSettings(dir=str(root / "scenes"), mode="fetch"), bounds=tuple(ES_AOI))
        (root / "staged").mkdir()
        made["staged"] = _cube(root / "staged.json", root / "staged")
        with serve(root / "catalogue") as server:
            search.run(ES_TILE, 2020, root / "remote.json", catalog=f"{server.url}/catalog.json")
            (root / "remote").mkdir()
            made["remote"] = _cube(root / "remote.json", root / "remote")
    finally:
        logger.removeHandler(handler)
    return made, [r.getMessage() for r in records]


def test_a_real_earth_search_scene_gives_its_own_values_on_every_path(es_cubes):
    """Local, staged and remote give one cube; a 10 m band (stored at 100 m) is the COG's DN at every
    clear pixel, by map coordinate; SCL 8, 9 and 10 (nearest, from 200 m) are masked, nothing else."""
    made, _ = es_cubes
    local, valid, transform, tags = made["local"]
    for other in ("staged", "remote"):
        assert np.array_equal(made[other][0], local) and np.array_equal(made[other][1], valid), other
    assert json.loads(tags["item_steps"]) == {"S2A_29RKH_20200219_0_L2A": 1}  # 19 February: the second step
    steps_filled = [k for k in range(local.shape[0]) if (local[k] != -32768).any()]
    assert steps_filled == [1] and (valid[[k for k in range(12) if k != 1]] == 0).all()
    scl, scl_t = _source("SCL")
    red, red_t = _source("B04")
    rows, cols = np.mgrid[0:local.shape[2], 0:local.shape[3]]
    xs, ys = transform * (cols + 0.5, rows + 0.5)
    scl_here = np.vectorize(lambda x, y: _at(scl, scl_t, x, y))(xs, ys)
    cloudy = np.isin(scl_here, [8, 9, 10])
    assert cloudy.mean() > 0.3 and (~cloudy).mean() > 0.3  # the corner holds both
    assert np.array_equal(valid[1] == 0, cloudy)
    assert (local[1][:, cloudy] == -32768).all() and (local[1][:, ~cloudy] != -32768).all()
    red_here = np.vectorize(lambda x, y: _at(red, red_t, x, y))(xs, ys)
    b04 = list(ES_SETTINGS.bands).index("B04")
    assert np.array_equal(local[1, b04][~cloudy], red_here[~cloudy].astype(np.int16))  # DN x 1e-4 + 0, x 1e4
    for x, y in [(290000.0, 2780000.0), (305555.0, 2775555.0)]:  # chosen pixels, by map coordinate
        col, row = ~transform * (x, y)
        if not cloudy[int(row), int(col)]:
            assert local[1, b04, int(row), int(col)] == _at(red, red_t, x, y)


def test_a_real_20m_band_is_gdals_bilinear_but_at_exact_ties(es_cubes):
    """B11 (stored at 200 m) onto the 100 m cube: GDAL's bilinear warp, to the DN, except where the
    interpolated value is an exact half (GDAL's rounding of a .5 in double against lcflow's in float32):
    there at most 1 DN apart, as docs/stages.md says."""
    made, _ = es_cubes
    local, _, transform, _ = made["local"]
    swir, swir_t = _source("B11")
    with rasterio.open(ES / "B11.tif") as src:
        crs = src.crs
    gdal = np.zeros(local.shape[2:], np.uint16)
    reproject(swir, gdal, src_transform=swir_t, src_crs=crs, dst_transform=transform, dst_crs=crs,
              resampling=Resampling.bilinear, src_nodata=0, dst_nodata=0)
    ours = local[1, list(ES_SETTINGS.bands).index("B11")].astype(np.int32)
    clear = ours != -32768
    diff = np.abs(ours[clear] - gdal[clear].astype(np.int32))
    assert diff.max() <= 1 and (diff == 0).mean() > 0.95, (diff.max(), (diff > 0).mean())


def test_what_the_items_do_not_describe_is_said_on_every_path(es_cubes):
    """The item's proj:shape describes the full-resolution files: every path reads the files' own grids and
    says so; a band coarser than the cube and than Sentinel-2 stores it is said too, once a cube."""
    _, said = es_cubes
    described = [m for m in said if "the file is 258 x 258 px at 100 m, where its item says proj:shape 10980 x 10980 "
                 "px and proj:transform at 10 m" in m]
    assert len([m for m in described if "read on the file's own grid (6 of 6 files so)" in m]) == 2  # local, remote
    assert any("cut on the file's own grid" in m for m in described)  # the stage-in's area copy
    coarse = [m for m in said if "coarser than the cube's" in m]
    assert coarse == 3 * ["tile 29RKH 2020: band B11 is stored at 200 m (asset swir16), coarser than the cube's 100 m "
                          "and Sentinel-2's 20 m: interpolated, with no detail finer than 200 m",
                          "tile 29RKH 2020: the mask (asset scl) is stored at 200 m, coarser than the cube's 100 m: "
                          "each of its cells masks 2 x 2 cube pixels"], coarse


def _sen2r_catalogue(folder: Path, named: bool) -> Path:
    """A catalogue of the two stacks, an item a date: BOA (11 bands; named in eo:bands where ``named``) and
    SCL, no offset (sen2cor before baseline 04.00, recorded as such)."""
    catalogue = pystac.Catalog("sen2r", "two sen2cor stacks")
    for day in ("20170703", "20190723"):
        when = f"{day[:4]}-{day[4:6]}-{day[6:]}T10:20:00Z"
        item = pystac.Item(f"S2A_{SEN2R_TILE}_{day}", None, None, pystac.utils.str_to_datetime(when),
                           {"s2:mgrs_tile": SEN2R_TILE, "s2:processing_baseline": "02.05", "proj:epsg": 32632})
        for kind in ("BOA", "SCL"):
            path = SEN2R / f"S2A2A_{day}_022_Barbellino_{kind}_10.tif"
            extra = {"eo:bands": [{"name": b} for b in SEN2R_ORDER]} if kind == "BOA" and named else {}
            item.add_asset(kind, pystac.Asset(str(path), media_type=pystac.MediaType.GEOTIFF, extra_fields=extra))
        catalogue.add_item(item)
    catalogue.normalize_and_save(str(folder), catalog_type=pystac.CatalogType.ABSOLUTE_PUBLISHED)
    return folder / "catalog.json"


def test_a_multi_band_stack_is_refused_in_one_line_until_its_bands_are_named(tmp_path):
    catalogue = _sen2r_catalogue(tmp_path / "catalogue", named=False)
    search.run(SEN2R_TILE, 2019, tmp_path / "items.json", catalog=str(catalogue))
    with pytest.raises(LcflowError) as refused:
        cube.run(tmp_path / "items.json", SEN2R_TILE, 2019, tmp_path / "c.tif", tmp_path / "v.tif",
                 CubeSettings(bands=("B02", "B04")), bounds=SEN2R_AOI)
    assert "\n" not in str(refused.value)
    assert str(refused.value).startswith(
        f"item S2A_{SEN2R_TILE}_20190723 has no asset for band B02 (looked for 'B02', 'blue', 'b02', 'B02_10m', and "
        "for a band named B02 in an asset's eo:bands; it has BOA, SCL): a multi-band asset is read by the names its "
        "eo:bands give, or by cube.asset_bands")
    assert not list(tmp_path.glob("*.tif"))


@pytest.mark.parametrize("named", [True, False])
def test_a_sen2cor_stack_gives_its_own_values_masked_by_its_scl(named, tmp_path):
    """Both dates, each a year of one date: every band of the stack (10 m, the 20 m bands as sen2r stored
    them at 10 m) is the file's DN at every pixel its SCL (20 m, nearest) leaves clear; its band named in
    eo:bands or in cube.asset_bands."""
    catalogue = _sen2r_catalogue(tmp_path / "catalogue", named=named)
    bands = ("B02", "B03", "B04", "B05", "B08", "B8A", "B11", "B12")
    settings = CubeSettings(bands=bands, dilation_px=0, **({} if named else {"asset_bands": {"BOA": SEN2R_ORDER}}))
    for day in ("20170703", "20190723"):
        year = int(day[:4])
        search.run(SEN2R_TILE, year, tmp_path / f"{year}.json", catalog=str(catalogue))
        (tmp_path / str(year)).mkdir()
        got, valid, transform, tags = _cube(tmp_path / f"{year}.json", tmp_path / str(year), settings, SEN2R_TILE,
                                            SEN2R_AOI, year)
        step = 6  # July
        assert json.loads(tags["item_steps"]) == {f"S2A_{SEN2R_TILE}_{day}": step}
        with rasterio.open(SEN2R / f"S2A2A_{day}_022_Barbellino_BOA_10.tif") as boa, \
                rasterio.open(SEN2R / f"S2A2A_{day}_022_Barbellino_SCL_10.tif") as scl_file:
            assert boa.transform == transform  # the stack's own grid
            stack, scl = boa.read(), scl_file.read(1)
        scl_10 = np.kron(scl, np.ones((2, 2), dtype=np.uint8))
        clear = ~np.isin(scl_10, [0, 1, 3, 8, 9, 10])
        assert clear.any() and (~clear).any() == (day == "20170703")  # clouds (8, 9) on the first date only
        assert np.array_equal(valid[step] > 0, clear)
        for b, band in enumerate(bands):
            source = stack[SEN2R_ORDER.index(band)]
            assert np.array_equal(got[step, b][clear], source[clear].astype(np.int16)), (day, band)
            assert (got[step, b][~clear] == -32768).all()
        assert (got[[k for k in range(12) if k != step]] == -32768).all()


def test_a_nodata_value_in_one_band_masks_that_band_alone(tmp_path):
    """A real stack with B02 set to its nodata (65535) in a block: that block's B02 is no data in the cube,
    its other bands keep the stack's values; no 65535 reaches the cube as a value."""
    folder = tmp_path / "stack"
    shutil.copytree(SEN2R, folder)
    path = folder / "S2A2A_20190723_022_Barbellino_BOA_10.tif"
    with rasterio.open(path, "r+") as ds:
        b02 = ds.read(2)
        b02[10:20, 5:15] = 65535
        ds.write(b02, 2)
    catalogue = _sen2r_catalogue(tmp_path / "catalogue", named=True)
    items = json.loads(catalogue.parent.joinpath(f"S2A_{SEN2R_TILE}_20190723",
                                                 f"S2A_{SEN2R_TILE}_20190723.json").read_text())
    items["assets"]["BOA"]["href"] = str(path)
    items["assets"]["BOA"]["raster:bands"] = [{"nodata": 65535} for _ in SEN2R_ORDER]
    manifest = tmp_path / "items.json"
    manifest.write_text(json.dumps({"type": "FeatureCollection", "features": [items]}))
    got, valid, _, _ = _cube(manifest, tmp_path, CubeSettings(bands=("B02", "B04"), mask="none", dilation_px=0),
                             SEN2R_TILE, SEN2R_AOI, 2019)
    assert (got[6, 0, 10:20, 5:15] == -32768).all() and (got[6, 1, 10:20, 5:15] != -32768).all()
    assert (valid[6] > 0).all()  # the pixel still has an observation, in B04
    assert (got[6] != -32768).sum() == 2 * got.shape[2] * got.shape[3] - 100 and not (got == 32767).any()
