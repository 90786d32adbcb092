import json

import numpy as np
import rasterio

from lcflow.labels.nomenclature import CLC_NODATA_GRID
from lcflow.synth import clouds, landscape, spectra

from ..conftest import SMALL_AOI


def test_landscape_has_every_class_and_some_change():
    land = landscape.generate(np.random.default_rng(3), 256, change_fraction=0.03)
    assert set(np.unique(land.before)) == set(landscape.DEMO_CLASSES)
    changed = land.before != land.after
    assert 0.01 < changed.mean() < 0.06
    # clear-cuts turn forest into shrub, construction turns arable land into industry
    pairs = set(zip(land.before[changed].tolist(), land.after[changed].tolist()))
    assert pairs <= {(311, 324), (312, 324), (211, 121)}


def test_phenology_separates_crops_from_grass():
    rng = np.random.default_rng(1)
    cls = np.array([[landscape.ARABLE] * 40 + [landscape.PASTURE] * 40 + [landscape.BROADLEAF, landscape.WATER]],
                   dtype=np.uint16)
    doy = np.array([20, 200, 250, 340])
    r = spectra.reflectance(cls, np.arange(82).reshape(1, 82), doy, rng)  # one parcel per pixel
    nir, red = r[:, spectra.BANDS.index("B08")], r[:, spectra.BANDS.index("B04")]
    ndvi = (nir - red) / (nir + red)
    arable, pasture = ndvi[:, 0, :40], ndvi[:, 0, 40:80]
    assert (pasture > 0.55).all()  # grass is green all year
    assert np.median(arable[1]) > 0.7 > 0.4 > np.median(arable[0])  # crops grow in summer, fields lie bare in winter
    assert np.ptp(np.median(arable, axis=1)) > 0.3 > 0.15 > np.ptp(np.median(pasture, axis=1))
    assert (arable[3] < pasture[3].min()).all()  # December: every field below every meadow
    assert arable[0].std() > 3 * pasture[0].std()  # each parcel its own crop and calendar
    assert ndvi[1, 0, 80] > 0.6 > ndvi[3, 0, 80]  # deciduous: leaves in summer, none in December
    assert (ndvi[:, 0, 81] < 0.2).all()  # water never green
    assert nir[0, 0, 81] < 0.05  # open water absorbs near infrared


def test_clouds_are_flagged_but_not_all():
    rng = np.random.default_rng(5)
    clear = np.full((10, 128, 128), 0.05, dtype=np.float32)
    refl, scl = clouds.observe(clear, rng, cover=0.4)
    flagged = np.isin(scl, (8, 9, 10))
    brightened = refl[0] > 0.06
    assert 0.2 < flagged.mean() < 0.7
    assert (brightened & ~np.isin(scl, (3, 8, 9, 10))).any(), "some haze must be missed by SCL"
    assert (scl == 3).any()


def test_demo_catalog_is_earth_search_shaped(demo):
    items = sorted((demo / "catalog").glob("*_*/sentinel-2-l2a/*/*.json"))
    assert items
    item = json.loads(items[0].read_text())
    p = item["properties"]
    assert p["grid:code"].startswith("MGRS-") and p["proj:epsg"] in (32631, 32632)
    assert {"eo:cloud_cover", "s2:processing_baseline", "mgrs:utm_zone", "datetime"} <= set(p)
    assert {"blue", "green", "red", "rededge1", "rededge2", "rededge3", "nir", "nir08", "swir16", "swir22", "scl"} <= set(item["assets"])
    red = items[0].parent / item["assets"]["red"]["href"]
    swir = items[0].parent / item["assets"]["swir16"]["href"]
    with rasterio.open(red) as r10, rasterio.open(swir) as r20:
        assert r10.res == (10.0, 10.0) and r20.res == (20.0, 20.0)
        assert r10.crs.to_epsg() == p["proj:epsg"] and r10.nodata == 0 and r10.dtypes[0] == "uint16"
        assert list(r10.transform)[:6] == item["assets"]["red"]["proj:transform"]
        assert r10.tags(ns="IMAGE_STRUCTURE").get("LAYOUT") == "COG"


def test_demo_corine_is_stored_like_the_product(demo):
    with rasterio.open(demo / "corine" / "clc_demo_3035.tif") as ds:
        assert ds.crs.to_epsg() == 3035 and ds.res == (100.0, 100.0)
        assert ds.transform.c % 100 == 0 and ds.transform.f % 100 == 0
        values = set(np.unique(ds.read(1)).tolist())
        assert ds.nodata == CLC_NODATA_GRID and CLC_NODATA_GRID in values
        assert values - {CLC_NODATA_GRID} <= set(range(1, 45)) and len(values) > 5
        assert ds.colormap(1)[12] == (255, 255, 168, 255)  # grid code 12 = 211 arable land


def test_demo_truth_on_tile_grid(demo):
    with rasterio.open(demo / "truth" / "31UFT_2018.tif") as ds:
        assert ds.crs.to_epsg() == 32631
        assert ds.bounds == tuple(SMALL_AOI["31UFT"])
        assert set(np.unique(ds.read(1)).tolist()) <= set(landscape.DEMO_CLASSES)
