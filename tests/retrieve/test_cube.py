import datetime as dt
import json
import warnings

import numpy as np
import pytest
import rasterio
from rasterio.enums import Compression, Interleaving

from lcflow.errors import LcflowError
from lcflow.retrieve import composite, cube, scene_files, scene_reading, time_grid
from lcflow.retrieve.cube_settings import CubeSettings

from ..conftest import BANDS, SMALL_AOI


def test_time_grid():
    grid = time_grid.year_grid(2019, 12)
    edges, centres = grid.edges, grid.centres
    assert edges[0] == dt.datetime(2019, 1, 1) and edges[-1] == dt.datetime(2020, 1, 1)
    assert len(centres) == 12 and centres[0].month == 1 and centres[6].month == 7
    assert time_grid.year_grid(2020, 73).steps == 73 and grid.period == "12 equal windows"


def _steps(times, edges):
    return time_grid.steps_of_instants(times, edges), len(edges) - 1


def _offsets(offsets, bands: int):
    """Readings that take ``offsets`` (DN, per observation) off every band."""
    n = len(offsets)
    return [composite.BandReading(np.ones(n, np.float32), -np.asarray(offsets, np.float32), np.full(n, np.nan))
            for _ in range(bands)]


def test_clear_mask_dilates_invalid_pixels():
    scl = np.full((2, 7, 7), 4, dtype=np.uint8)
    scl[0, 3, 3] = 9
    mask = composite.clear_mask(scl, [9], dilation_px=1)
    assert not mask[0, 3, 3] and not mask[0, 2, 3] and not mask[0, 3, 4]
    assert mask[0, 2, 2] and mask[1].all()  # 4-connected growth, never across time
    assert composite.clear_mask(scl, [9], 0).sum() == scl.size - 1


def test_clear_mask_is_the_same_for_classes_as_read_and_as_integers():
    scl = np.random.default_rng(4).integers(0, 12, (3, 40, 50)).astype(np.uint8)
    for invalid in ([0, 1, 3, 8, 9, 10], [9], []):
        assert np.array_equal(composite.clear_mask(scl, invalid, 1), composite.clear_mask(scl.astype(np.int32), invalid, 1))
        assert np.array_equal(composite._among(scl, invalid), np.isin(scl, invalid))


@pytest.mark.parametrize("px", [0, 1, 2, 3])
def test_grown_is_scipys_dilation_by_the_cross_in_each_image(px):
    from scipy import ndimage

    mask = np.random.default_rng(px).random((3, 30, 41)) < 0.03
    mask[0, 0, 0] = mask[1, -1, -1] = mask[2, 0, -1] = True  # at the edges
    structure = np.zeros((3, 3, 3), dtype=bool)
    structure[1] = ndimage.generate_binary_structure(2, 1)
    expected = ndimage.binary_dilation(mask, structure=structure, iterations=px) if px else mask
    assert np.array_equal(composite.grown(mask, px), expected)


def test_clear_mask_masks_no_data_without_growing_it():
    """SCL 0 is also what lies outside a scene: masked, but a scene's edge loses no clear pixel."""
    scl = np.full((1, 5, 5), 4, dtype=np.uint8)
    scl[0, 0, :] = 0
    scl[0, 4, 4] = 9
    mask = composite.clear_mask(scl, [0, 9], dilation_px=1)
    assert not mask[0, 0].any() and mask[0, 1].all()
    assert not mask[0, 3, 4] and not mask[0, 4, 3]  # the cloud still grows


def test_composite_is_median_of_clear_observations():
    edges = [dt.datetime(2018, 1, 1), dt.datetime(2018, 7, 1), dt.datetime(2019, 1, 1)]
    times = np.array(["2018-02-01", "2018-03-01", "2018-04-01", "2018-09-01"], dtype="datetime64[us]")
    values = [np.array([1, 5, 3, 7], dtype=np.uint16).reshape(4, 1, 1)]
    clear = np.array([True, True, True, False]).reshape(4, 1, 1)
    out, counts = composite.composite(values, clear, *_steps(times, edges))
    assert out[0, 0, 0, 0] == 3.0 and counts[0, 0, 0] == 3
    assert np.isnan(out[1, 0, 0, 0]) and counts[1, 0, 0] == 0


def test_composite_removes_each_scenes_offset_before_the_median():
    """Scenes of baseline 04.00 carry +1000 DN, older ones none: mixed in one window, the median
    is taken of harmonised values (medians of raw DNs would pick the offset ones)."""
    edges = [dt.datetime(2022, 1, 1), dt.datetime(2023, 1, 1)]
    times = np.array(["2022-02-01", "2022-03-01", "2022-04-01"], dtype="datetime64[us]")
    values = [np.array([1500, 1600, 700], dtype=np.uint16).reshape(3, 1, 1),  # 500, 600, 700 harmonised
              np.array([2000, 2100, 1200], dtype=np.uint16).reshape(3, 1, 1)]
    clear = np.ones((3, 1, 1), dtype=bool)
    out, counts = composite.composite(values, clear, *_steps(times, edges), _offsets([1000, 1000, 0], 2))
    assert out[0, :, 0, 0].tolist() == [600.0, 1100.0] and counts[0, 0, 0] == 3
    one, _ = composite.composite([v[:1] for v in values], clear[:1], *_steps(times[:1], edges), _offsets([1000], 2))
    assert one[0, :, 0, 0].tolist() == [500.0, 1000.0]  # a single scene: its value


def test_to_int16_rounds_clips_and_marks_nodata():
    comp = np.array([1.4, 2.5, -3.6, 40000.0, -40000.0, np.nan], dtype=np.float32)
    assert composite.to_int16(comp).tolist() == [1, 2, -4, 32767, -32767, composite.NODATA]
    window = np.random.default_rng(0).normal(0, 20000, (3, 2, 5, 7)).astype(np.float32)
    window[window > 15000] = np.nan
    expected = np.where(np.isnan(window), composite.NODATA, np.clip(np.round(np.nan_to_num(window)), -32767, 32767))
    for chunk in (1, 9, 10**6):  # chunks that end mid-row, mid-band and not at all
        stored = composite.to_int16(window.copy(), chunk=chunk)
        assert stored.shape == window.shape and stored.dtype == np.int16
        np.testing.assert_array_equal(stored, expected)


def test_fill_time_gaps_interpolates_between_observed_steps():
    comp = np.full((6, 2, 1, 2), np.nan, dtype=np.float32)
    comp[[1, 4], 0, 0, 0] = [2.0, 8.0]
    comp[:, 1, 0, 0] = np.arange(6)
    filled = composite.fill_time_gaps(comp, chunk_px=1)
    assert filled is comp  # in place
    assert comp[:, 0, 0, 0].tolist() == [2, 2, 4, 6, 8, 8]  # ends: the nearest observed step
    assert comp[:, 1, 0, 0].tolist() == list(range(6))  # observed steps keep their value
    assert np.isnan(comp[:, :, 0, 1]).all()  # never observed: stays without value


def test_cube_with_indices_and_filled_gaps(stages, tmp_path):
    """NDVI follows the bands in each step and equals what the cube's own B08 and B04 give; filled
    gaps leave observed values as they were and no nodata where the year has an observation."""
    cube.run(stages["items2018"], "31UFT", 2018, tmp_path / "c.tif", tmp_path / "v.tif",
             CubeSettings(bands=BANDS, block_px=64, indices=["NDVI"], fill_gaps="linear"), bounds=SMALL_AOI["31UFT"])
    layers = [*BANDS, "NDVI"]
    with rasterio.open(tmp_path / "c.tif") as ds:
        assert json.loads(ds.tags()["bands"]) == layers and ds.count == 12 * len(layers)
        assert ds.descriptions[len(BANDS)] == "NDVI_t00" and ds.tags()["gaps"] == "linear in time"
        got = ds.read().reshape(12, len(layers), ds.height, ds.width).astype(np.float64)
    with rasterio.open(stages["cube2018"]) as ds:
        plain = ds.read().reshape(12, len(BANDS), ds.height, ds.width)
    with rasterio.open(tmp_path / "v.tif") as ds, rasterio.open(stages["valid2018"]) as ref:
        counts = ds.read()
        assert np.array_equal(counts, ref.read())  # valid counts still say what was observed
    observed = np.broadcast_to((counts > 0)[:, None], plain.shape)
    assert np.array_equal(got[:, :len(BANDS)][observed], plain[observed])
    ever = (counts > 0).any(axis=0)
    assert (~observed).any() and (got[:, :, ever] != composite.NODATA).all()
    assert (got[:, :, ~ever] == composite.NODATA).all()
    nir, red = got[:, BANDS.index("B08")], got[:, BANDS.index("B04")]
    has = np.broadcast_to(ever, nir.shape) & (nir + red > 1)
    nir, red, ndvi = nir[has], red[has], got[:, -1][has]
    # computed from the composites before they were rounded to whole DNs: within what +-0.5 DN allows
    low, high = 10000 * (nir - red - 1) / (nir + red), 10000 * (nir - red + 1) / (nir + red)
    assert ((ndvi >= np.floor(low) - 1) & (ndvi <= np.ceil(high) + 1)).all()
    assert np.median(np.abs(ndvi - 10000 * (nir - red) / (nir + red))) < 3


def _surveyed(manifest, tile: str, year: int, settings: CubeSettings, bounds):
    """The Scenes of a manifest once their files are surveyed: how each asset is read."""
    items = cube.read_manifest(manifest)
    layout = cube.check_items(items, tile, year, settings)
    grid = cube.tile_grid(tile, items, settings.resolution, bounds)
    scenes = scene_reading.Scenes(manifest, items, tile, year, grid, layout, settings, None)
    with scenes.reading():
        return scenes, layout, grid


def test_assets_read_as_stored_and_resampled_by_lcflow_equal_gdals_warp(stages, tmp_path, monkeypatch):
    """Assets read on their own grid (their files' headers') from files kept open, the 20 m bands
    interpolated and SCL taken by nearest neighbour (lcflow.resample), give the cube that odc-stac's GDAL
    warp of every asset gives."""
    settings = CubeSettings(bands=BANDS, block_px=64)
    scenes, layout, grid = _surveyed(stages["items2018"], "31UFT", 2018, settings, SMALL_AOI["31UFT"])
    scl = layout.mask.key
    assert set(scenes.native) == set(layout.keys) and scenes.warped == []
    assert {k for k, (t, _) in scenes.native.items() if t.a == 20} == {"rededge1", "rededge2", "rededge3", "nir08",
                                                                      "swir16", "swir22", scl}
    method = scene_reading.resampling_method
    assert method(scenes.native[scl][0], grid, True) == "nearest" == method(scenes.native["red"][0], grid, False)
    assert {m for _, m in scenes.native.values()} == {"nearest", "bilinear"}
    monkeypatch.setattr(scene_files, "_native_grids", lambda *args: {})
    cube.run(stages["items2018"], "31UFT", 2018, tmp_path / "c.tif", tmp_path / "v.tif", settings,
             bounds=SMALL_AOI["31UFT"])
    with rasterio.open(tmp_path / "c.tif") as a, rasterio.open(stages["cube2018"]) as b:
        assert np.array_equal(a.read(), b.read())


def test_cube_layout(stages):
    with rasterio.open(stages["cube2018"]) as ds:
        assert ds.count == 12 * len(BANDS) and ds.dtypes[0] == "int16" and ds.nodata == -32768
        assert ds.descriptions[0] == "B02_t00" and ds.descriptions[-1] == "B12_t11"
        assert ds.crs.to_epsg() == 32631 and ds.bounds == tuple(SMALL_AOI["31UFT"]) and ds.res == (10, 10)
        assert len(json.loads(ds.tags()["time_steps"])) == 12
        # as docs/stages.md promises: 256 px tiles, band-interleaved, ZSTD
        assert ds.block_shapes[0] == (256, 256) and ds.interleaving == Interleaving.band
        assert ds.compression == Compression.zstd
        data = ds.read()
    with rasterio.open(stages["valid2018"]) as ds:
        counts = ds.read()
    assert ds.count == 12
    # a composite has a value exactly where it had a clear observation
    has_value = (data.reshape(12, len(BANDS), *data.shape[1:]) != -32768).all(axis=1)
    assert np.array_equal(has_value, counts > 0)
    valid = data[data != -32768]
    assert 0 < np.median(valid) < 5000  # reflectance x 10000


@pytest.mark.parametrize("recorded_in", ["raster:bands", "s2:processing_baseline", "processing:version"])
def test_harmonisation_removes_the_offset_once(recorded_in, stages, tmp_path):
    """A copy of the scenes stored with baseline 04.00 and +1000 DN gives the same cube, whichever way the
    catalogue records the offset: in its assets' raster:bands (-0.1, Copernicus Data Space's and Earth
    Search's), or only as the baseline (Planetary Computer's property, or the processing extension's)."""
    items = json.loads(stages["items2018"].read_text())
    for f in items["features"][:4]:
        f["properties"].pop("s2:processing_baseline")
        f["properties"].pop("earthsearch:boa_offset_applied")
        if recorded_in != "raster:bands":
            f["properties"][recorded_in] = "04.00"
        for key, asset in f["assets"].items():
            if key == "scl":
                continue
            band = asset["raster:bands"][0]
            if recorded_in == "raster:bands":
                band["offset"] = -0.1
            else:
                band.pop("scale"), band.pop("offset")
            dst = tmp_path / f["id"] / f"{key}.tif"
            dst.parent.mkdir(exist_ok=True)
            with rasterio.open(asset["href"]) as src:
                profile, data = src.profile, src.read()
            with rasterio.open(dst, "w", **{**profile, "driver": "GTiff"}) as out:
                out.write(np.where(data > 0, data + 1000, 0).astype(data.dtype))
            asset["href"] = str(dst)
    manifest = tmp_path / "items.json"
    manifest.write_text(json.dumps(items))
    cube.run(manifest, "31UFT", 2018, tmp_path / "c.tif", tmp_path / "v.tif", CubeSettings(bands=BANDS, block_px=64),
             bounds=SMALL_AOI["31UFT"])
    with rasterio.open(tmp_path / "c.tif") as a, rasterio.open(stages["cube2018"]) as b:
        assert np.array_equal(a.read(), b.read())


def test_cube_errors(stages, tmp_path):
    with pytest.raises(LcflowError, match="does not exist"):
        cube.run(tmp_path / "none.json", "31UFT", 2018, tmp_path / "c.tif", tmp_path / "v.tif", CubeSettings(bands=BANDS))
    with pytest.raises(LcflowError, match="EPSG:32631"):
        cube.run(stages["items2018"], "32ULC", 2018, tmp_path / "c.tif", tmp_path / "v.tif", CubeSettings(bands=BANDS))
    with pytest.raises(LcflowError, match="B13"):
        cube.run(stages["items2018"], "31UFT", 2018, tmp_path / "c.tif", tmp_path / "v.tif", CubeSettings(bands=["B13"]))
    assert not list(tmp_path.glob("*.tif"))


def _nanmedian_composite(values, clear, times, edges, offsets):
    """The composite as array expressions: each step's observations as float32 less their offset, NaN
    where not clear (or NaN), and numpy's nanmedian."""
    edge64 = np.array(edges, dtype="datetime64[us]")
    out = np.full((len(edges) - 1, len(values), *clear.shape[1:]), np.nan, dtype=np.float32)
    counts = np.zeros((len(edges) - 1, *clear.shape[1:]), dtype=np.uint8)
    for k in range(len(edges) - 1):
        sel = np.flatnonzero((times >= edge64[k]) & (times < edge64[k + 1]))
        if not len(sel):
            continue
        counts[k] = np.minimum(clear[sel].sum(axis=0), 255)
        for b, dn in enumerate(values):
            obs = dn[sel].astype(np.float32) - offsets[sel, None, None]
            obs[~clear[sel] | np.isnan(dn[sel])] = np.nan
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN pixel
                out[k, b] = np.nanmedian(obs, axis=0)
    return out, counts


@pytest.mark.parametrize("obs", [1, 2, 3, 6, 11, 40, 300])
def test_composite_is_numpys_nanmedian_to_the_bit(obs):
    """Steps of 0 to 300 observations (a step of 300 counts 255), in no order of time, with offsets."""
    rng = np.random.default_rng(obs)
    edges = [dt.datetime(2018, 1, 1) + dt.timedelta(days=73 * k) for k in range(6)]
    days = rng.integers(0, 300, obs) if obs < 300 else np.zeros(obs, int)
    times = np.array("2018-01-01", dtype="datetime64[us]") + days.astype("timedelta64[D]")
    values = [rng.integers(0, 12000, (obs, 9, 13)).astype(np.uint16), rng.random((obs, 9, 13)) * 9000]
    clear = rng.random((obs, 9, 13)) < (0.6 if obs < 300 else 0.97)
    clear[:, 0, 0] = False  # a pixel never observed
    offsets = rng.choice([0, 1000], obs).astype(np.float32)
    got, counts = composite.composite(values, clear, *_steps(times, edges), _offsets(offsets, 2))
    expected, expected_counts = _nanmedian_composite(values, clear, times, edges, offsets)
    assert got.dtype == np.float32 and np.array_equal(got, expected, equal_nan=True)
    assert np.array_equal(counts, expected_counts) and np.isnan(got[:, :, 0, 0]).all()
    assert (counts == 255).any() == (obs == 300) and np.isfinite(got).mean() > 0.1


@pytest.mark.parametrize("size", [1, 2, 4, 8, 16, 32])
def test_the_sorting_network_sorts_every_input(size):
    """By the 0-1 principle, a comparator network that sorts every sequence of 0 and 1 sorts everything."""
    network = composite._sorting_network(size)
    assert all(0 <= i < j < size for i, j in network)
    rng = np.random.default_rng(size)
    bits = np.array([[(k >> b) & 1 for b in range(size)] for k in range(2 ** size)]) if size <= 16 \
        else rng.integers(0, 2, (20000, size))
    data = np.concatenate([bits, rng.random((500, size))]).T.copy()  # inputs along axis 0
    for i, j in network:
        low = np.minimum(data[i], data[j])
        data[j] = np.maximum(data[i], data[j])
        data[i] = low
    assert (np.diff(data, axis=0) >= 0).all()


def test_the_block_cache_is_sized_for_every_scenes_blocks_within_the_limit(stages, tmp_path, monkeypatch, caplog):
    """Grown to what the scenes' blocks need, at most cache_mb (a warning when that is less), only while
    the cube is built; the cube is the same whatever the cache."""
    before, sized = scene_reading.gdal_cache_bytes(), scene_reading.block_cache_bytes
    during = []
    original = scene_reading.composite
    monkeypatch.setattr(scene_reading, "composite",
                        lambda *a, **k: during.append(scene_reading.gdal_cache_bytes()) or original(*a, **k))
    monkeypatch.setattr(scene_reading, "block_cache_bytes", lambda *a: before + 700 * 2**20)
    with caplog.at_level("INFO", logger="lcflow"):
        cube.run(stages["items2018"], "31UFT", 2018, tmp_path / "a.tif", tmp_path / "av.tif",
                 CubeSettings(bands=BANDS, block_px=64, cache_mb=4096), bounds=SMALL_AOI["31UFT"])
        assert set(during) == {before + 700 * 2**20} and scene_reading.gdal_cache_bytes() == before
        assert "decoded more than once" not in caplog.text
        during.clear()
        cube.run(stages["items2018"], "31UFT", 2018, tmp_path / "b.tif", tmp_path / "bv.tif",
                 CubeSettings(bands=BANDS, block_px=64, cache_mb=1), bounds=SMALL_AOI["31UFT"])
        assert set(during) == {before}  # never below the process's cache
        assert "need %d MB of block cache, more than cube.cache_mb (1 MB)" % ((before + 700 * 2**20) // 2**20) in caplog.text
    with rasterio.open(tmp_path / "a.tif") as a, rasterio.open(tmp_path / "b.tif") as b, \
            rasterio.open(stages["cube2018"]) as c:
        assert np.array_equal(a.read(), c.read()) and np.array_equal(b.read(), c.read())
    scene = 4 * 1024 * 1024 * 2 + 6 * 1024 * 1024 * 2 + 1024 * 1024  # Sentinel-2's COGs: 10 m, 20 m bands, SCL
    assert sized(scene, 100, 0) == 200 * scene  # each block twice over


def test_composite_stored_is_to_int16_of_the_composite():
    rng = np.random.default_rng(5)
    edges = [dt.datetime(2018, 1, 1) + dt.timedelta(days=73 * k) for k in range(6)]
    times = np.array("2018-01-01", dtype="datetime64[us]") + rng.integers(0, 290, 30).astype("timedelta64[D]")
    values = [rng.integers(0, 65535, (30, 8, 9)).astype(np.uint16), rng.normal(0, 30000, (30, 8, 9))]
    clear = rng.random((30, 8, 9)) < 0.3
    offsets = rng.choice([0, 1000], 30).astype(np.float32)
    comp, counts = composite.composite(values, clear, *_steps(times, edges), _offsets(offsets, 2))
    stored, stored_counts = composite.composite(values, clear, *_steps(times, edges), _offsets(offsets, 2), stored=True)
    assert stored.dtype == np.int16 and np.array_equal(stored, composite.to_int16(comp))
    assert np.array_equal(counts, stored_counts)
    assert (stored == composite.NODATA).any() and (stored == 32767).any() and (stored == -32767).any()


def _rewritten(stages, tmp_path, change):
    """The demo's 2018 manifest, each item's dict changed by ``change(feature, folder)``."""
    items = json.loads(stages["items2018"].read_text())
    for f in items["features"]:
        change(f, tmp_path / f["id"])
    manifest = tmp_path / "items.json"
    manifest.write_text(json.dumps(items))
    return manifest


def test_a_products_own_mask_asset_masks_as_its_clear_values_say(stages, tmp_path):
    """Another processor's mask (1 cloud or shadow, 0 clear, 255 outside the scene) in place of SCL: the cube
    SCL's invalid classes give, grown the same, what lies outside not grown."""
    def add_mask(f, folder):
        folder.mkdir()
        with rasterio.open(f["assets"]["scl"]["href"]) as src:
            profile, scl = src.profile, src.read(1)
        clm = np.where(np.isin(scl, [1, 3, 8, 9, 10]), 1, np.where(scl == 0, 255, 0)).astype(np.uint8)
        with rasterio.open(folder / "clm.tif", "w", **{**profile, "driver": "GTiff", "nodata": 255}) as out:
            out.write(clm, 1)
        f["assets"]["clm"] = {"href": str(folder / "clm.tif"), "type": "image/tiff"}
        del f["assets"]["scl"]

    manifest = _rewritten(stages, tmp_path, add_mask)
    settings = CubeSettings(bands=BANDS, block_px=64, mask="asset", mask_asset="clm", mask_clear=[0])
    cube.run(manifest, "31UFT", 2018, tmp_path / "c.tif", tmp_path / "v.tif", settings, bounds=SMALL_AOI["31UFT"])
    with rasterio.open(tmp_path / "c.tif") as a, rasterio.open(stages["cube2018"]) as b:
        assert np.array_equal(a.read(), b.read()) and a.tags()["mask"] == "asset"
    with pytest.raises(LcflowError, match=r"^cube.mask: asset needs cube.mask_asset"):
        CubeSettings(mask="asset")
    with pytest.raises(LcflowError, match=r"has no asset 'scl' for band SCL|has no asset for band SCL"):
        cube.run(manifest, "31UFT", 2018, tmp_path / "d.tif", tmp_path / "dv.tif", CubeSettings(bands=BANDS),
                 bounds=SMALL_AOI["31UFT"])


def test_no_mask_keeps_every_observation_with_data(stages, tmp_path):
    """`cube.mask: none` (composites already masked): every observation with data counts, clouds too; no
    SCL asset needed."""
    manifest = _rewritten(stages, tmp_path, lambda f, folder: f["assets"].pop("scl"))
    cube.run(manifest, "31UFT", 2018, tmp_path / "c.tif", tmp_path / "v.tif",
             CubeSettings(bands=BANDS, block_px=64, mask="none"), bounds=SMALL_AOI["31UFT"])
    with rasterio.open(tmp_path / "v.tif") as ours, rasterio.open(stages["valid2018"]) as masked:
        counts, fewer = ours.read(), masked.read()
    assert (counts >= fewer).all() and (counts > fewer).any()
    items = cube.read_manifest(manifest)
    steps = time_grid.steps_of([time_grid.item_interval(i) for i in items], time_grid.year_grid(2018, 12).edges)
    assert counts.max(axis=(1, 2)).tolist() == np.bincount(steps, minlength=12).tolist()  # every scene, everywhere


def test_an_offset_the_pixels_never_had_is_refused_naming_the_item(stages, tmp_path):
    """Harmonised DNs whose items say raster:bands offset -0.1: most clear reflectances would fall below
    -0.05, so the year is refused, the item named, before a cube is written."""
    def claim_offset(f, folder):
        for key, asset in f["assets"].items():
            if key != "scl":
                asset["raster:bands"][0]["offset"] = -0.1

    manifest = _rewritten(stages, tmp_path, claim_offset)
    with pytest.raises(LcflowError) as refused:
        cube.run(manifest, "31UFT", 2018, tmp_path / "c.tif", tmp_path / "v.tif",
                 CubeSettings(bands=BANDS, block_px=64), bounds=SMALL_AOI["31UFT"])
    said = str(refused.value)
    assert said.startswith("tile 31UFT 2018: item S2") and "of its clear reflectances lie below -0.05 once its " \
        "offset of -1000 DN (raster:bands) is applied" in said and "\n" not in said
    assert not list(tmp_path.glob("*.tif"))


def test_an_item_that_records_no_offset_stops_the_stage_in_before_any_fetch(stages, tmp_path):
    from lcflow.retrieve import stage_in
    from lcflow.retrieve.stage_settings import StageSettings

    def forget(f, folder):
        f["properties"].pop("s2:processing_baseline"), f["properties"].pop("earthsearch:boa_offset_applied")
        for asset in f["assets"].values():
            for band in asset.get("raster:bands", []):
                band.pop("scale", None), band.pop("offset", None)

    manifest = _rewritten(stages, tmp_path, forget)
    with pytest.raises(LcflowError, match=r"records no offset .*: set cube.boa_add_offset"):
        stage_in.dry_run(manifest, "31UFT", 2018, BANDS, StageSettings(dir=str(tmp_path / "s"), mode="fetch"))
    assert not (tmp_path / "s").exists()
    said = stage_in.dry_run(manifest, "31UFT", 2018, CubeSettings(bands=BANDS, boa_add_offset=0),
                            StageSettings(dir=str(tmp_path / "s"), mode="fetch"))
    assert said == 11 * len(cube.read_manifest(manifest))
