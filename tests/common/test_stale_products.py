"""A dropped tile's, year's or model's products: found by their names, a kept model's suffixes kept."""

from lcflow.common import stale_products


def test_products_of_what_the_config_no_longer_names_are_found(tmp_path):
    names = {
        "maps": ["31UFT_2018_rf.tif", "31UFT_2018_my_model.tif", "31UFT_2018_lstm.stac.json",
                 "32ULC_2018_rf.tif", "31UFT_2017_rf.qml", "31UFT_2018_tempcnn.tif", "31UFT_2018_blend.tif"],
        "maps/raw": ["31UFT_2018_rf_confidence.tif", "31UFT_2018_my_model_probabilities.tif"],
        "changes": ["31UFT_2018_2019_rf.tif", "31UFT_2017_2018_rf.png", "31UFT_rf.json", "32ULC_rf.json",
                    "31UFT_tempcnn.json"],
        "quicklooks": ["32ULC_2018_lstm.quicklook.png"],
        "reference": ["32ULC_2018_labelled.gpkg"],  # a person's: never listed
    }
    for folder, files in names.items():
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        for name in files:
            (tmp_path / folder / name).write_text("x")
    for tile_year in ("31UFT/2018", "31UFT/2017", "32ULC/2018"):
        (tmp_path / tile_year).mkdir(parents=True)
    found = stale_products.find(tmp_path, ["31UFT"], [2018, 2019], ["rf", "lstm", "my_model"])
    assert {k: sorted(p.name for p in v) for k, v in found.items()} == {
        "maps": ["31UFT_2017_rf.qml", "31UFT_2018_tempcnn.tif", "32ULC_2018_rf.tif"],
        "changes": ["31UFT_2017_2018_rf.png", "31UFT_tempcnn.json", "32ULC_rf.json"],
        "quicklooks": ["32ULC_2018_lstm.quicklook.png"],
        "TILE/YEAR": ["2017", "2018"],
    }
    said = stale_products.said(tmp_path, found)
    assert "(maps 3, quicklooks 1, changes 3, TILE/YEAR 2; e.g. " in said and "neither updates nor removes" in said
    assert stale_products.said(tmp_path, {}) is None
    assert stale_products.find(tmp_path / "none", ["31UFT"], [2018], ["rf"]) == {}
