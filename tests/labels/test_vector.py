"""Labels from vectors: CORINE polygons in every format, the user's own polygons and points, a CLC change
layer, and the nomenclature checks that go with them; on the real CORINE subset and the real Slovenia
land-use polygons."""


import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import rasterio
import shapely
import yaml

from lcflow.common.raster import Grid, read_tag, write_cog
from lcflow.errors import LcflowError
from lcflow.labels import alignment as labels
from lcflow.labels import nomenclature, sampling
from lcflow.labels import vector as vector_labels
from lcflow.labels.sample_settings import SampleSettings

from ..conftest import DATA, corine_polygons
from ..real_tables import slovenia_cube, slovenia_grid

REAL = DATA / "clc_lanjaron_epsg3042.tif"
SLOVENIA = DATA / "eolearn_slovenia"
UTM = Grid.from_bounds(32630, (455000, 4085000, 461000, 4095000), 10)
SLOVENIA_MAPPING = {
    "name": "Slovenian land use (RABA)",
    "classes": [{"class_code": 1, "class_name": "cultivated land", "codes": [1], "color": "#ffff00"},
                {"class_code": 2, "class_name": "forest", "codes": [2], "color": [0, 128, 0]},
                {"class_code": 3, "class_name": "grassland", "codes": [3]},
                {"class_code": 4, "class_name": "shrubland", "codes": [4]},
                {"class_code": 8, "class_name": "artificial surface", "codes": [8]}],
    "ignore": [0],
}


@pytest.fixture(scope="module")
def clc_polygons() -> gpd.GeoDataFrame:
    """The real EPSG:3042 subset as polygons, codes as text."""
    return corine_polygons(REAL)


def _write(frame: gpd.GeoDataFrame, path, **kwargs):
    if path.suffix == ".parquet":
        frame.to_parquet(path, **kwargs)
    else:
        frame.to_file(path, **kwargs)
    return path


@pytest.mark.parametrize("name", ["clc.gpkg", "clc.shp", "clc.parquet"])
def test_corine_polygons_give_the_labels_of_the_corine_raster(clc_polygons, tmp_path, name):
    """The same classes as polygons and as the raster, onto a UTM 10 m grid: >= 99 % identical (pixel centres
    in polygons against nearest cells)."""
    path = _write(clc_polygons, tmp_path / name)
    ours, record = labels.source_on_grid(path, UTM)
    raster = labels.clc_on_grid(REAL, UTM)
    assert record["code_column"] == "Code_18" and record["geometry"] == "areas"
    labelled = (ours != vector_labels.NO_CODE) | (raster > 0)
    agree = float((np.where(ours == vector_labels.NO_CODE, 0, ours) == raster)[labelled].mean())
    assert agree >= 0.99, agree


def test_a_corine_polygon_whose_ring_crosses_itself_is_mended_with_a_warning(clc_polygons, tmp_path, caplog):
    """The real CORINE subset with one polygon's ring twisted into a bow tie (its outline's first and third
    vertices swapped): a published layer's fault, mended by make_valid and said in the log; the labels
    stay those of the untwisted layer outside that polygon."""
    twisted = clc_polygons.copy()
    biggest = int(twisted.geometry.area.values.argmax())
    ring = list(twisted.geometry.iloc[biggest].exterior.coords)
    ring[1], ring[3] = ring[3], ring[1]
    twisted.loc[twisted.index[biggest], "geometry"] = shapely.Polygon(ring)
    assert not twisted.geometry.iloc[biggest].is_valid
    with caplog.at_level("WARNING"):
        ours, _ = labels.source_on_grid(_write(twisted, tmp_path / "twisted.gpkg"), UTM)
    assert any("1 polygon(s) in the area of" in r.getMessage() and "mended with shapely.make_valid" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    whole, _ = labels.source_on_grid(_write(clc_polygons, tmp_path / "whole.gpkg"), UTM)
    assert (ours == whole).mean() > 0.9  # one polygon's vertices moved; the rest as before


def test_only_the_features_of_the_tile_area_are_read(clc_polygons, tmp_path, monkeypatch):
    """A bounding-box filter on read, in the file's CRS: the features far from the tile never come back."""
    far = clc_polygons.iloc[:50].copy()
    far["geometry"] = far.geometry.translate(xoff=0, yoff=300_000)  # N-E axis order does not matter to shapely
    path = _write(pd.concat([clc_polygons, far], ignore_index=True), tmp_path / "country.gpkg")
    seen = {}
    read_file = gpd.read_file

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return read_file(*args, **kwargs)

    monkeypatch.setattr(gpd, "read_file", spy)
    layer = vector_labels.open_layer(path)
    small = Grid.from_bounds(32630, (456000, 4086000, 457000, 4087000), 10)
    features, kind = vector_labels.read_in_area(layer, small.crs, small.bounds, "the tile", "Code_18")
    assert seen["bbox"] is not None and kind == "areas"
    assert 0 < len(features) < len(clc_polygons) / 5
    minx, miny, maxx, maxy = features.total_bounds  # clipped to the box of the area (in the file's CRS)
    assert maxx - minx < 2000 and maxy - miny < 2000


def test_geoparquet_with_a_bbox_covering_is_read_by_area(clc_polygons, tmp_path):
    covered = _write(clc_polygons, tmp_path / "covered.parquet", write_covering_bbox=True)
    plain = _write(clc_polygons, tmp_path / "plain.parquet")
    small = Grid.from_bounds(32630, (456000, 4086000, 458000, 4088000), 10)
    a, _ = labels.source_on_grid(covered, small)
    b, _ = labels.source_on_grid(plain, small)
    assert np.array_equal(a, b) and (a != vector_labels.NO_CODE).mean() > 0.9


def test_slovenia_polygons_become_samples_with_the_right_classes(tmp_path):
    """The real land-use polygons (EPSG:32633, LULC_ID) onto their 10 m grid agree with the raster eo-learn
    burnt from them, and the samples drawn inside them, away from their edges, carry their polygon's class."""
    cube, valid = slovenia_cube(tmp_path)
    (tmp_path / "map.yaml").write_text(yaml.safe_dump(SLOVENIA_MAPPING))
    nomen = nomenclature.from_mapping_file(tmp_path / "map.yaml", clc_codes=False)
    source = labels.LabelSource(SLOVENIA / "LULC.gpkg", corine=False, code_column="LULC_ID")
    classes = labels.run(source, cube, tmp_path / "labels.tif", nomen)
    eolearn = np.load(SLOVENIA / "LULC.npy")[..., 0]
    assert float((classes == np.where(eolearn == 0, 255, eolearn)).mean()) >= 0.99
    assert read_tag(tmp_path / "labels.tif", "class_names") == {"1": "cultivated land", "2": "forest", "3": "grassland",
                                                                  "4": "shrubland", "8": "artificial surface"}
    frame = sampling.run(cube, valid, tmp_path / "labels.tif", tmp_path / "s.parquet", SampleSettings(
        per_class=300, min_valid_fraction=0.3, block_px=20, min_per_class=0, clean={"min_label_probability": 0}),
        tile="33TVM", year=2016)
    assert set(frame["label"]) == {2, 3, 4, 8}  # cultivated land: 11 pixels, none 1 px inside its polygon
    assert (frame["label"].to_numpy() == eolearn[frame["row"], frame["col"]]).mean() >= 0.99
    polygons = gpd.read_file(SLOVENIA / "LULC.gpkg")
    centres = gpd.GeoDataFrame(geometry=gpd.points_from_xy(frame["x"], frame["y"]), crs=polygons.crs)
    inside = gpd.sjoin(centres, polygons, predicate="within")
    assert (inside.groupby(level=0)["LULC_ID"].first().to_numpy() == frame["label"].to_numpy()).all()
    by_class = polygons.dissolve("LULC_ID").geometry
    squares = [shapely.box(x - 5, y - 5, x + 5, y + 5) for x, y in zip(frame["x"], frame["y"])]
    purity = np.array([sq.intersection(by_class[c]).area / 100 for sq, c in zip(squares, frame["label"])])
    # all labelled pixels: mean 0.967, 10 % under 0.9 (edges); the samples are whole pixels of their class
    assert purity.mean() >= 0.99 and np.quantile(purity, 0.02) >= 0.9


def test_points_become_samples_as_they_are(tmp_path):
    """Field points: each in its own pixel, no boundary erosion; a pixel with points of two codes is dropped."""
    grid = slovenia_grid()
    cube, valid = slovenia_cube(tmp_path)
    polygons = gpd.read_file(SLOVENIA / "LULC.gpkg").to_crs(32633)
    polygons = polygons[polygons["LULC_ID"] > 0]
    rng = np.random.default_rng(3)
    points = polygons.sample_points(3, rng=rng).explode(index_parts=False)
    field = gpd.GeoDataFrame({"crop": polygons.loc[points.index, "LULC_ID"].to_numpy()},
                             geometry=points.to_numpy(), crs=polygons.crs).to_crs(4326)
    twin = field.iloc[[0]].assign(crop=9)  # a second observer disagrees on the first point
    path = _write(pd.concat([field, twin], ignore_index=True), tmp_path / "field.geojson")
    (tmp_path / "map.csv").write_text("code,class_code,class_name\n1,1,crop\n2,2,forest\n3,3,grass\n4,4,shrub\n"
                                      "8,8,built\n9,ignore,\n")
    nomen = nomenclature.from_mapping_file(tmp_path / "map.csv", clc_codes=False)
    classes = labels.run(labels.LabelSource(path, corine=False, code_column="crop"), cube, tmp_path / "labels.tif", nomen)
    record = read_tag(tmp_path / "labels.tif", "label_source")
    # what the points say, pixel by pixel, worked out here: a pixel whose points disagree has no label
    utm = pd.concat([field, twin], ignore_index=True).to_crs(32633)
    rows, cols = rasterio.transform.rowcol(grid.transform, utm.geometry.x, utm.geometry.y)
    placed = pd.DataFrame({"row": rows, "col": cols, "code": utm["crop"]})
    placed = placed[(placed["row"] >= 0) & (placed["row"] < grid.height) & (placed["col"] >= 0) & (placed["col"] < grid.width)]
    per_pixel = placed.groupby(["row", "col"])["code"].agg(["min", "max"])
    expected = per_pixel[per_pixel["min"] == per_pixel["max"]]["min"].to_dict()
    assert record["geometry"] == "points" and record["conflicting_pixels"] == len(per_pixel) - len(expected) >= 1
    assert record["pixels"] == len(expected) and record["points"] - record["outside"] == len(placed)
    frame = sampling.run(cube, valid, tmp_path / "labels.tif", tmp_path / "s.parquet", SampleSettings(
        per_class=1000, min_valid_fraction=0.0, block_px=20, min_per_class=0, clean={"min_label_probability": 0}),
        tile="33TVM", year=2016)
    assert len(frame) == len(expected) == int((classes != 255).sum())  # no point lost to boundary erosion
    got = {(r, c): code for r, c, code in zip(frame["row"], frame["col"], frame["label"])}
    assert got == expected


def test_a_change_layer_takes_its_pixels_out_of_the_labels(clc_polygons, tmp_path):
    """CLC change polygons (vector) and a change raster: every pixel touching a change is unlabelled."""
    grid = Grid.from_bounds(32630, (456000, 4086000, 458000, 4088000), 10)
    changed = gpd.GeoDataFrame({"Code_18": ["211"]}, geometry=[shapely.box(456500, 4086500, 457000, 4087000)],
                               crs="EPSG:32630").to_crs(3042)
    vec = _write(changed, tmp_path / "cha.gpkg")
    NONE = nomenclature.clc_level(3).nodata
    base = labels.run(REAL, _grid_file(tmp_path, grid), tmp_path / "a.tif", nomenclature.clc_level(3))
    cut = labels.run(REAL, _grid_file(tmp_path, grid), tmp_path / "b.tif", nomenclature.clc_level(3), change=vec)
    rows, cols = slice(100, 150), slice(50, 100)  # the box: x 456500-457000, y 4086500-4087000
    assert (cut[rows, cols] == NONE).all() and (base[rows, cols] != NONE).all()
    outside = np.ones(cut.shape, bool)
    outside[99:151, 49:101] = False  # a touching pixel may go too
    assert np.array_equal(cut[outside], base[outside])
    excluded = read_tag(tmp_path / "b.tif", "label_source")["change_layer"]["excluded_pixels"]
    assert excluded == int(((cut == NONE) & (base != NONE)).sum()) >= int((base[rows, cols] != NONE).sum())
    mask = np.zeros((grid.height, grid.width), np.uint8)
    mask[rows, cols] = 7
    write_cog(tmp_path / "cha.tif", mask, grid, nodata=0)
    from_raster = labels.run(REAL, _grid_file(tmp_path, grid), tmp_path / "c.tif", nomenclature.clc_level(3),
                             change=tmp_path / "cha.tif")
    assert (from_raster[rows, cols] == NONE).all()
    assert np.array_equal(from_raster[outside], base[outside])


def _grid_file(tmp_path, grid: Grid):
    path = tmp_path / "grid.tif"
    if not path.exists():
        write_cog(path, np.zeros((grid.height, grid.width), np.uint8), grid)
    return path


def test_codes_present_but_not_mapped_are_listed(clc_polygons, tmp_path):
    grid = Grid.from_bounds(32630, (456000, 4086000, 458000, 4088000), 10)
    (tmp_path / "m.csv").write_text("clc_code,class_code,class_name\n242,1,mixed crops\n")
    nomen = nomenclature.from_mapping_file(tmp_path / "m.csv")
    codes, _ = labels.source_on_grid(REAL, grid)
    present = sorted(set(np.unique(codes).tolist()) - {vector_labels.NO_CODE, 242})
    assert len(present) >= 5
    with pytest.raises(LcflowError) as err:
        labels.run(REAL, _grid_file(tmp_path, grid), tmp_path / "l.tif", nomen)
    message = str(err.value)
    assert "neither mapped nor ignored" in message and all(f"{c} (" in message for c in present)
    assert not (tmp_path / "l.tif").exists()
    rows = "".join(f"{c},ignore,\n" for c in present)
    (tmp_path / "m.csv").write_text("clc_code,class_code,class_name\n242,1,mixed crops\n" + rows)
    out = labels.run(REAL, _grid_file(tmp_path, grid), tmp_path / "l.tif", nomenclature.from_mapping_file(tmp_path / "m.csv"))
    assert set(np.unique(out).tolist()) == {1, 255} and (out == 1).sum() == (codes == 242).sum()


@pytest.mark.parametrize("text, message", [
    ("clc_code,class_code,class_name\n211,1,arable\n211,2,other\n", "m.csv:3: code 211 is given twice (also at 2)"),
    ("clc_code,class_code,class_name\n211,1,arable\n212,1,crops\n", "m.csv:3: class 1 is named 'crops' here and 'arable'"),
    ("clc_code,class_code,class_name,red,green,blue\n211,1,a,1,2,3\n212,1,a,3,2,1\n", "class 1 has colour (3, 2, 1) here"),
    ("clc_code,class_code,class_name\n211,ignore,\n", "every code is ignored"),
    ("clc_code,class_code,class_name\n219,1,x\n", "m.csv:2: clc_code 219 is not a CLC level-3 code"),
    ("clc_code,class_code,class_name\n211,0,x\n", "class_code 0 must be within 1..65534"),
])
def test_bad_mapping_files_are_refused_with_the_line(tmp_path, text, message):
    (tmp_path / "m.csv").write_text(text)
    with pytest.raises(LcflowError) as err:
        nomenclature.from_mapping_file(tmp_path / "m.csv")
    assert message in str(err.value)


def test_yaml_and_csv_mappings_are_the_same_nomenclature(tmp_path):
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(SLOVENIA_MAPPING))
    (tmp_path / "m.csv").write_text("code,class_code,class_name,red,green,blue\n1,1,cultivated land,255,255,0\n"
                                    "2,2,forest,0,128,0\n3,3,grassland,,,\n4,4,shrubland,,,\n8,8,artificial surface,,,\n"
                                    "0,ignore,,,,\n")
    a = nomenclature.from_mapping_file(tmp_path / "m.yaml", clc_codes=False)
    b = nomenclature.from_mapping_file(tmp_path / "m.csv", clc_codes=False)
    assert (a.mapping, a.names, a.colors, a.ignored) == (b.mapping, b.names, b.colors, b.ignored)
    assert a.name == "Slovenian land use (RABA)" and a.ignored == {0}
    assert a.apply(np.array([[0, 1, 8, 5, -1]])).tolist() == [[255, 1, 8, 255, 255]]
    (tmp_path / "m.yaml").write_text(yaml.safe_dump({**SLOVENIA_MAPPING, "ignore": [2]}))
    with pytest.raises(LcflowError, match="code 2 is given twice"):
        nomenclature.from_mapping_file(tmp_path / "m.yaml", clc_codes=False)


@pytest.mark.parametrize("edit, message", [
    (lambda g: g.rename(columns={"Code_18": "code"}),
     "name one column of CLC codes named like Code_18 with labels.code_column (columns: ID, code)"),
    (lambda g: g.assign(Code_18="forest"), "column 'Code_18' holds value(s) that are not integer codes >= 0: forest"),
    (lambda g: g.assign(Code_18="999x"), "not integer codes"),
    (lambda g: g.assign(Code_18="219"), "holds value(s) 219 in the tile that are not CLC level-3 codes"),
    (lambda g: g.assign(geometry=g.geometry.translate(yoff=500_000)), "has no feature within the area of the tile"),
    (lambda g: g.assign(geometry=g.geometry.boundary), "LineString"),
])
def test_bad_vector_sources_say_what_is_wrong(clc_polygons, tmp_path, edit, message):
    path = _write(edit(clc_polygons.iloc[:300].copy()), tmp_path / "bad.gpkg")
    with pytest.raises(LcflowError) as err:
        labels.source_on_grid(path, UTM)
    assert message in str(err.value) and "bad.gpkg" in str(err.value)


def test_a_file_of_several_layers_needs_one_named(clc_polygons, tmp_path):
    path = _write(clc_polygons.iloc[:300], tmp_path / "two.gpkg", layer="clc2018")
    _write(clc_polygons.iloc[:300], path, layer="clc2012")
    with pytest.raises(LcflowError, match=r"two.gpkg holds 2 layers \(clc2018, clc2012\): name one \(labels.layer\)"):
        labels.source_on_grid(path, UTM)
    codes, _ = labels.source_on_grid(labels.LabelSource(path, layer="clc2012"), UTM)
    assert (codes != vector_labels.NO_CODE).any()
    with pytest.raises(LcflowError, match="has no layer 'clc2000'"):
        labels.source_on_grid(labels.LabelSource(path, layer="clc2000"), UTM)


def test_reference_data_without_a_code_column_lists_the_columns(tmp_path):
    with pytest.raises(LcflowError, match=r"LULC.gpkg: name the column of class codes with labels.code_column "
                                          r"\(columns: index, RABA_ID, AREA, DATE, LULC_ID, LULC_NAME\)"):
        labels.source_on_grid(labels.LabelSource(SLOVENIA / "LULC.gpkg", corine=False), slovenia_grid())


def test_reference_labels_are_not_cleaned_unless_asked(tmp_path):
    """Label-noise cleaning is for CORINE; the user's surveyed labels are kept unless reference_data is set."""
    from lcflow.labels.samples_table import read

    cube, valid = slovenia_cube(tmp_path)
    (tmp_path / "map.yaml").write_text(yaml.safe_dump(SLOVENIA_MAPPING))
    nomen = nomenclature.from_mapping_file(tmp_path / "map.yaml", clc_codes=False)
    labels.run(labels.LabelSource(SLOVENIA / "LULC.gpkg", corine=False, code_column="LULC_ID"), cube,
               tmp_path / "labels.tif", nomen)
    common = dict(per_class=100, min_valid_fraction=0.3, block_px=20, min_per_class=0)
    sampling.run(cube, valid, tmp_path / "labels.tif", tmp_path / "kept.parquet", SampleSettings(**common),
                 tile="33TVM", year=2016)
    sampling.run(cube, valid, tmp_path / "labels.tif", tmp_path / "cleaned.parquet",
                 SampleSettings(**common, clean={"reference_data": True}), tile="33TVM", year=2016)
    kept, cleaned = (read(tmp_path / f"{n}.parquet").meta["label_checks"] for n in ("kept", "cleaned"))
    assert kept["applied"] == [] and [c["check"] for c in cleaned["applied"]] == ["out-of-fold label probability"]
    assert sum(v["noisy"] for v in cleaned["per_class"].values()) > 0
