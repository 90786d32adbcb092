"""The demo's 256 px cube of 31UFT 2018 and its samples, for the prediction benchmarks."""

from pathlib import Path

from lcflow.labels import alignment as labels, nomenclature, sampling
from lcflow.retrieve import cube, search
from lcflow.synth.demo import make_demo

AOI = {"31UFT": [640000, 5760000, 642560, 5762560]}
BANDS = ["B02", "B03", "B04", "B05", "B06", "B07", "B08", "B8A", "B11", "B12"]


def demo_cube(work: Path) -> tuple[Path, Path]:
    """Demo scenes -> cube -> labels -> samples under ``work``; return the cube and the samples table."""
    make_demo(work / "demo", AOI, [2018])
    search.run("31UFT", 2018, work / "items.json", catalog=str(work / "demo" / "catalog" / "catalog.json"))
    cube.run(work / "items.json", "31UFT", 2018, work / "cube.tif", work / "valid.tif", bands=BANDS, bounds=AOI["31UFT"])
    labels.run(work / "demo" / "corine" / "clc_demo_3035.tif", work / "cube.tif", work / "labels.tif", nomenclature.clc_level(2))
    sampling.run(work / "cube.tif", work / "valid.tif", work / "labels.tif", work / "samples.parquet", tile="31UFT", year=2018)
    return work / "cube.tif", work / "samples.parquet"
