import numpy as np
import pytest
import rasterio

from lcflow.errors import LcflowError
from lcflow.labels import nomenclature as nm

from ..conftest import DATA


def test_official_legend():
    legend = nm.clc_legend()
    assert len(legend) == 44
    assert [e.grid_code for e in legend] == list(range(1, 45))
    by_code = {e.clc_code: e for e in legend}
    assert by_code[211].label3 == "Non-irrigated arable land" and by_code[211].rgb == (255, 255, 168)
    assert by_code[523].grid_code == 44


def test_levels():
    l1, l2, l3 = nm.clc_level(1), nm.clc_level(2), nm.clc_level(3)
    assert l1.codes == [1, 2, 3, 4, 5]
    assert len(l2.codes) == 15 and l2.codes[0] == 11 and l2.codes[-1] == 52
    assert len(l3.codes) == 44
    assert l2.names[31] == "Forests" and l1.names[5] == "Water bodies"
    assert l2.apply(np.array([211, 312, 0, 999])).tolist() == [21, 31, 255, 255]
    with pytest.raises(LcflowError, match="level"):
        nm.clc_level(4)


def test_grid_codes_and_clc_codes_are_both_accepted():
    grid = np.array([[1, 12, 44], [48, 49, 255]])
    assert nm.clc_codes_from_raster(grid).tolist() == [[111, 211, 523], [0, 0, 0]]
    clc = np.array([[111, 211, 523], [0, 4294967295, 990]], dtype=np.uint32)
    assert nm.clc_codes_from_raster(clc, nodata=4294967295).tolist() == [[111, 211, 523], [0, 0, 0]]


@pytest.mark.parametrize("values,message", [
    ([[12, 12, 99]], "value(s) 99 of the CORINE raster are not CORINE codes (read as grid codes"),
    ([[12, 23, 112]], "mixes grid codes (1..44: 12, 23) and CLC codes (111..523: 112)"),
    ([[111, 211, 4294967295]], "value(s) 4294967295 of the CORINE raster are not CORINE codes (read as CLC codes"),
])
def test_values_that_are_not_corine_codes_are_listed(values, message):
    with pytest.raises(LcflowError) as err:
        nm.clc_codes_from_raster(np.array(values, dtype=np.int64), where="c.tif")
    assert str(err.value).startswith("c.tif: ") and message in str(err.value)


def test_real_corine_subset_decodes():
    with rasterio.open(DATA / "clc_lanjaron_epsg3042.tif") as ds:
        codes = nm.clc_codes_from_raster(ds.read(1), ds.nodata)
    present = set(np.unique(codes).tolist()) - {0}
    assert present <= {e.clc_code for e in nm.clc_legend()} and len(present) > 10


def test_mapping_file(tmp_path):
    f = tmp_path / "map.csv"
    f.write_text("clc_code,class_code,class_name,red,green,blue\n211,1,Cropland,255,255,0\n231,2,Grassland,0,255,0\n311,3,Forest,0,100,0\n312,3,Forest,0,100,0\n")
    n = nm.from_mapping_file(f)
    assert n.codes == [1, 2, 3] and n.colors[3] == (0, 100, 0)
    assert n.apply(np.array([211, 312, 512])).tolist() == [1, 3, 255]
    f.write_text("clc_code,class_code,class_name\n219,1,Cropland\n")
    with pytest.raises(LcflowError, match=r"map.csv:2: clc_code 219"):
        nm.from_mapping_file(f)
    f.write_text("clc,class_code,class_name\n211,1,Cropland\n")
    with pytest.raises(LcflowError, match="clc_code"):
        nm.from_mapping_file(f)
    with pytest.raises(LcflowError, match="does not exist"):
        nm.from_mapping_file(tmp_path / "none.csv")
