"""Reference-sample assessment: a stratified random design drawn from a map, labelled from a known truth,
gives accuracy and class areas whose 95 % intervals hold the truth about as often as they should."""

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import rasterio

from lcflow.assess import accuracy as assess
from lcflow.assess import accuracy_figures
from lcflow.assess import design as sample_design
from lcflow.common.metrics import stratified_estimates
from lcflow.common.raster import Grid, write_cog
from lcflow.errors import LcflowError

GRID = Grid.from_bounds(32631, (600000, 5700000, 604000, 5704000), 10)  # 400 x 400 px, 1 ha = 100 px
NAMES = {1: "urban", 2: "crops", 3: "forest", 4: "water"}


def _truth_and_map(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A truth of four classes in blocks (shares about 3 / 53 / 40 / 4 %) and a map of it with class-dependent
    errors: crops mapped as forest or urban, forest as crops or water. (A rare class omitted into a large
    stratum, say 2 % of the water mapped as crops, is seen by a few hundred points in that stratum only
    by luck: its interval is then zero-wide and misses; Olofsson et al. 2014 advise more points in the
    large strata for that.)"""
    rng = np.random.default_rng(seed)
    truth = np.full((400, 400), 2, np.uint8)
    truth[:, 240:] = 3
    truth[:40, :160] = 4
    truth[300:360, 60:140] = 1
    wrong = rng.random(truth.shape)
    mapped = truth.copy()
    mapped[(truth == 2) & (wrong < 0.08)] = 3
    mapped[(truth == 2) & (wrong > 0.99)] = 1
    mapped[(truth == 3) & (wrong < 0.04)] = 2
    mapped[(truth == 3) & (wrong > 0.99)] = 4
    return truth, mapped


def _write_map(path, data):
    write_cog(path, data, GRID, nodata=255, tags={"class_names": {str(k): v for k, v in NAMES.items()}})
    return path


def _label_from(points: pd.DataFrame, truth: np.ndarray) -> pd.DataFrame:
    rows, cols = rasterio.transform.rowcol(GRID.transform, points["x"], points["y"])
    return points.assign(reference=truth[np.asarray(rows), np.asarray(cols)].astype(int))


def test_design_allocates_by_cochran_with_a_minimum_and_draws_points_of_their_stratum(tmp_path):
    truth, mapped = _truth_and_map()
    map_path = _write_map(tmp_path / "map.tif", mapped)
    design = sample_design.Design(target_se=0.02, min_per_class=30, users_accuracy={1: 0.5})
    pixels = sample_design.class_pixels(map_path)
    assert pixels == {c: int((mapped == c).sum()) for c in NAMES}
    sizes = sample_design.allocate(pixels, design)
    weights = np.array([pixels[c] for c in sorted(pixels)]) / mapped.size
    s = np.sqrt([0.25, 0.16, 0.16, 0.16])
    n = int(np.ceil((np.sum(weights * s) / 0.02) ** 2))
    assert sizes == {c: max(30, round(n * w)) for c, w in zip(sorted(pixels), weights)}
    points = sample_design.draw(map_path, design)
    assert points["stratum"].value_counts().to_dict() == sizes
    rows, cols = rasterio.transform.rowcol(GRID.transform, points["x"], points["y"])
    assert (mapped[np.asarray(rows), np.asarray(cols)] == points["stratum"]).all()
    assert len(set(zip(rows, cols))) == len(points)  # without replacement
    assert (points["stratum_pixels"] == points["stratum"].map(pixels)).all() and points["reference"].isna().all()
    assert points["stratum"].iloc[:20].nunique() > 1  # shuffled: the interpreter sees no class order
    sample_design.write(points, map_path, tmp_path / "ref.gpkg", tmp_path / "ref.csv")
    back = gpd.read_file(tmp_path / "ref.gpkg")
    assert back.crs.to_epsg() == 32631 and len(back) == len(points) and back["reference"].isna().all()
    csv = pd.read_csv(tmp_path / "ref.csv")
    assert {"lon", "lat"} <= set(csv.columns) and csv["lat"].between(51, 52).all()


def test_the_intervals_hold_the_true_areas_and_accuracies_about_95_percent_of_the_time(tmp_path):
    """20 independent designs, each labelled from the truth: the true area of every class and the map's true
    overall accuracy fall inside the 95 % intervals in 85-100 % of the cases (binomial spread of 20 x 5)."""
    truth, mapped = _truth_and_map()
    map_path = _write_map(tmp_path / "map.tif", mapped)
    true_area = {c: (truth == c).sum() / 100 for c in NAMES}  # ha
    true_oa = float((truth == mapped).mean())
    hits, total, errors = 0, 0, []
    for seed in range(20):
        points = sample_design.draw(map_path, sample_design.Design(target_se=0.015, min_per_class=40, seed=seed))
        labelled = _label_from(points, truth)
        path = tmp_path / f"ref{seed}.csv"
        frame = gpd.GeoDataFrame(labelled, geometry=gpd.points_from_xy(labelled["x"], labelled["y"]), crs=32631)
        frame.to_file(path.with_suffix(".gpkg"))
        r = assess.against_reference(map_path, path.with_suffix(".gpkg"))
        assert r["classes"] == [1, 2, 3, 4] and r["points_used"] == len(points) and r["points_unlabelled"] == 0
        for c, area, ci in zip(r["classes"], r["area_ha"], r["area_ci95_ha"]):
            hits += abs(area - true_area[c]) <= ci
            total += 1
            errors.append(area - true_area[c])
        hits += abs(r["overall_accuracy"] - true_oa) <= r["overall_accuracy_ci95"]
        total += 1
    assert 0.85 <= hits / total <= 0.99, hits / total
    # the map's own pixel counts are biased (crops under-mapped by ~6 %); the estimates are not
    assert abs(np.mean(errors)) < 0.02 * max(true_area.values())


def _two_maps() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The truth, map A (the strata) and map B (assessed), which errs where A does not."""
    truth, map_a = _truth_and_map(seed=0)
    _, map_b = _truth_and_map(seed=1)
    map_b[(truth == 3) & (np.random.default_rng(2).random(truth.shape) < 0.1)] = 4
    return truth, map_a, map_b


def test_a_sample_drawn_from_one_map_assesses_another(tmp_path):
    """Strata from the map of model A, assessment of model B's map (Stehman 2014): the file path gives the
    estimator's figures for B's classes at the points, and B's true accuracies lie within the intervals
    (how often they should is the simulation's test below)."""
    truth, map_a, map_b = _two_maps()
    a = _write_map(tmp_path / "a.tif", map_a)
    b = _write_map(tmp_path / "b.tif", map_b)
    points = _label_from(sample_design.draw(a, sample_design.Design(target_se=0.01, min_per_class=50, seed=4)), truth)
    gpd.GeoDataFrame(points, geometry=gpd.points_from_xy(points["x"], points["y"]), crs=32631).to_file(tmp_path / "r.gpkg")
    r = assess.against_reference(b, tmp_path / "r.gpkg")
    assert r["design"].startswith("stratified")
    rows, cols = rasterio.transform.rowcol(GRID.transform, points["x"], points["y"])
    direct = stratified_estimates(points["stratum"].to_numpy(), sample_design.class_pixels(a),
                                  map_b[np.asarray(rows), np.asarray(cols)], points["reference"].to_numpy(),
                                  [1, 2, 3, 4], 100.0)
    for key in ("overall_accuracy", "overall_accuracy_ci95", "area_ha", "area_ci95_ha", "users_accuracy",
                "producers_accuracy", "producers_accuracy_ci95"):
        assert np.allclose(r[key], direct[key], equal_nan=True), key
    assert abs(r["overall_accuracy"] - float((truth == map_b).mean())) <= r["overall_accuracy_ci95"]
    forest = r["classes"].index(3)
    assert abs(r["producers_accuracy"][forest] - float((map_b[truth == 3] == 3).mean())) <= \
        r["producers_accuracy_ci95"][forest]


@pytest.mark.parametrize("strata", ["another map", "the map itself"])
def test_the_95_percent_intervals_cover_the_truth_90_to_99_percent_of_the_time(strata):
    """500 independent stratified random samples (400 points a stratum) of a known map: for every figure
    (overall accuracy, and each class's area, user's and producer's accuracy) the share of the 95 %
    intervals that hold the true value lies between 0.90 and 0.99, with strata from another map (Stehman
    2014) and from the map itself (Olofsson et al. 2014). Figures whose true value is 0 or 1 are left out:
    their estimate is exact and their interval has no width. (At 100 points a stratum the user's accuracy
    of urban in the first case is covered only 63 % of the time: its commission errors are 1 % of the crop
    stratum, about one point a sample, and the linearised variance needs several.)"""
    truth, map_a, map_b = _two_maps()
    t, b = truth.ravel(), map_b.ravel()
    s = (map_a if strata == "another map" else map_b).ravel()
    classes = [1, 2, 3, 4]
    true = {"overall_accuracy": float((t == b).mean())}
    for k in classes:
        true[f"area {k}"] = (t == k).sum() / 100  # ha
        true[f"users {k}"] = ((b == k) & (t == k)).sum() / (b == k).sum()
        true[f"producers {k}"] = ((b == k) & (t == k)).sum() / (t == k).sum()
    members = {h: np.flatnonzero(s == h) for h in classes}
    pixels = {h: len(m) for h, m in members.items()}
    rng = np.random.default_rng(0)
    held = {key: 0 for key in true}
    reps = 500
    for _ in range(reps):
        points = np.concatenate([rng.choice(members[h], 400, replace=False) for h in classes])
        e = stratified_estimates(s[points], pixels, b[points], t[points], classes, 100.0)
        held["overall_accuracy"] += abs(e["overall_accuracy"] - true["overall_accuracy"]) <= e["overall_accuracy_ci95"]
        for i, k in enumerate(classes):
            held[f"area {k}"] += abs(e["area_ha"][i] - true[f"area {k}"]) <= e["area_ci95_ha"][i]
            held[f"users {k}"] += abs(e["users_accuracy"][i] - true[f"users {k}"]) <= e["users_accuracy_ci95"][i]
            held[f"producers {k}"] += abs(e["producers_accuracy"][i] - true[f"producers {k}"]) <= \
                e["producers_accuracy_ci95"][i]
    coverage = {key: n / reps for key, n in held.items() if 0 < true[key] < 1 or key.startswith("area")}
    assert len(coverage) == 11 and all(0.90 <= c <= 0.99 for c in coverage.values()), coverage
    # over the 11 figures the share is near 0.95: intervals 25 % too wide would cover about 0.986 of the time
    mean = sum(coverage.values()) / len(coverage)
    assert 0.93 <= mean <= 0.97, (mean, coverage)


def test_stehmans_worked_example_is_reproduced():
    """Stehman (2014), section 4: four strata of 40 000, 30 000, 20 000 and 10 000 ha, ten points each, map
    classes A-D that are not the strata. The published figures (pp. 4932-4936), to their three decimals;
    the standard error of B's producer's accuracy is 0.1165 by the paper's own formula (0.114 printed),
    as other implementations of it find too."""
    strata = [1] * 10 + [2] * 10 + [3] * 10 + [4] * 10
    mapped = [1] * 7 + [2] * 3 + [1] + [2] * 11 + [3] * 6 + [2] * 2 + [4] * 10
    reference = ([1] * 5 + [3, 2, 1, 2, 3] + [1] + [2] * 5 + [1, 1, 2, 2] + [3] * 5 + [4, 4, 2, 2, 1]
                 + [4] * 7 + [3, 3, 2])
    pixels = {1: 40000, 2: 30000, 3: 20000, 4: 10000}  # 1 ha pixels: areas in ha, proportions x 100000
    se = stratified_estimates(strata, pixels, mapped, reference, [1, 2, 3, 4], 10_000.0, z=1.0)
    a, b, c = 0, 1, 2
    assert se["area_ha"][a] / 1e5 == pytest.approx(0.35, abs=5e-4)
    assert se["area_ha"][c] / 1e5 == pytest.approx(0.20, abs=5e-4)
    assert se["overall_accuracy"] == pytest.approx(0.63, abs=5e-4)
    assert se["users_accuracy"][b] == pytest.approx(0.574, abs=5e-4)
    assert se["producers_accuracy"][b] == pytest.approx(0.794, abs=5e-4)
    assert se["area_ci95_ha"][a] / 1e5 == pytest.approx(0.082, abs=5e-4)  # z = 1: standard errors
    assert se["area_ci95_ha"][c] / 1e5 == pytest.approx(0.064, abs=5e-4)
    assert se["overall_accuracy_ci95"] == pytest.approx(0.085, abs=5e-4)
    assert se["users_accuracy_ci95"][b] == pytest.approx(0.125, abs=5e-4)
    assert se["producers_accuracy_ci95"][b] == pytest.approx(0.1165, abs=5e-4)
    # the sample as transcribed: the error matrix cell (B, C), p-hat 23, is the paper's 0.08
    w = np.array([pixels[h] for h in strata], float) / np.bincount(strata)[strata] / 1e5
    assert float(w[(np.array(mapped) == 2) & (np.array(reference) == 3)].sum()) == pytest.approx(0.08, abs=5e-4)


def test_points_without_a_label_are_left_out_and_a_simple_random_sample_works(tmp_path):
    truth, mapped = _truth_and_map()
    map_path = _write_map(tmp_path / "map.tif", mapped)
    rng = np.random.default_rng(0)
    rows, cols = rng.integers(0, 400, 600), rng.integers(0, 400, 600)
    xs, ys = rasterio.transform.xy(GRID.transform, rows, cols)
    ref = pd.array(truth[rows, cols].astype(int), dtype="Int64")
    ref[:50] = pd.NA
    frame = gpd.GeoDataFrame({"ref_class": ref}, geometry=gpd.points_from_xy(xs, ys), crs=32631).to_crs(4326)
    frame.to_file(tmp_path / "srs.geojson")
    r = assess.against_reference(map_path, tmp_path / "srs.geojson", column="ref_class")
    assert r["design"].startswith("simple random") and r["points_used"] == 550 and r["points_unlabelled"] == 50
    used = slice(50, None)
    assert r["overall_accuracy"] == pytest.approx(float((truth[rows, cols] == mapped[rows, cols])[used].mean()))


def test_a_reference_class_the_map_never_holds_is_one_it_omits(tmp_path):
    """A class of the nomenclature that the model never learnt (too rare in its samples) is a valid
    reference code: every point of it is an error of omission; a code outside the nomenclature is not."""
    from lcflow.labels.nomenclature import Nomenclature

    truth, mapped = _truth_and_map()
    map_path = _write_map(tmp_path / "map.tif", mapped)
    rng = np.random.default_rng(1)
    rows, cols = rng.integers(0, 400, 400), rng.integers(0, 400, 400)
    xs, ys = rasterio.transform.xy(GRID.transform, rows, cols)
    ref = truth[rows, cols].astype(int)
    ref[:40] = 5  # a class the map has no pixel of
    gpd.GeoDataFrame({"reference": ref}, geometry=gpd.points_from_xy(xs, ys), crs=32631).to_file(tmp_path / "r.gpkg")
    nomenclature = Nomenclature("five", {}, {1: "a", 2: "b", 3: "c", 4: "d", 5: "rare"})
    r = assess.against_reference(map_path, tmp_path / "r.gpkg", nomenclature=nomenclature)
    assert r["class_names"][-1] == "rare" and r["producers_accuracy"][-1] == 0 and r["mapped_area_ha"][-1] == 0
    assert r["overall_accuracy"] == pytest.approx(float((ref == mapped[rows, cols]).mean()))
    with pytest.raises(LcflowError, match=r"reference code\(s\) 5 are not classes of the map's nomenclature "
                                          r"\(1, 2, 3, 4; give the map's own nomenclature with --level or --mapping\)"):
        assess.against_reference(map_path, tmp_path / "r.gpkg")


def _one_labelled_in_a_stratum(frame):
    """Every point labelled but those of the smallest stratum, of which one: a stratum of one point (among
    enough points to back a figure)."""
    first = frame["stratum"] == frame["stratum"].value_counts().idxmin()
    keep = ~first | (frame.index == frame.index[first][0])
    return frame.assign(reference=pd.array(frame["reference"].where(keep), dtype="Int64"))


@pytest.mark.parametrize("edit, message", [
    (lambda f: f.assign(reference=7), "reference code(s) 7 are not classes of the map's nomenclature (1, 2, 3, 4;"),
    (lambda f: f.drop(columns="reference"), "has no column 'reference' (columns: point_id, stratum"),
    (lambda f: f.assign(reference="forest"), "column 'reference' holds value(s) that are not class codes: forest"),
    (_one_labelled_in_a_stratum, "at least 2 sample points"),
    (lambda f: f.assign(geometry=f.geometry.buffer(5)), "reference data are points"),
])
def test_bad_reference_files_say_what_is_wrong(tmp_path, edit, message):
    truth, mapped = _truth_and_map()
    map_path = _write_map(tmp_path / "map.tif", mapped)
    points = _label_from(sample_design.draw(map_path, sample_design.Design(target_se=0.05, min_per_class=5)), truth)
    frame = gpd.GeoDataFrame(points, geometry=gpd.points_from_xy(points["x"], points["y"]), crs=32631)
    edit(frame).to_file(tmp_path / "bad.gpkg")
    with pytest.raises(LcflowError) as err:
        assess.against_reference(map_path, tmp_path / "bad.gpkg")
    assert message in str(err.value) and "bad.gpkg" in str(err.value)


def test_the_class_area_figure_is_written_with_and_without_a_reference_sample(tmp_path):
    import matplotlib.image

    truth, mapped = _truth_and_map()
    map_path = _write_map(tmp_path / "map.tif", mapped)
    points = _label_from(sample_design.draw(map_path, sample_design.Design(target_se=0.05, min_per_class=5)), truth)
    gpd.GeoDataFrame(points, geometry=gpd.points_from_xy(points["x"], points["y"]), crs=32631).to_file(tmp_path / "r.gpkg")
    with_ref = {"reference": assess.against_reference(map_path, tmp_path / "r.gpkg")}
    accuracy_figures.areas_figure(with_ref, map_path, tmp_path / "a.png", "map")
    accuracy_figures.areas_figure({}, map_path, tmp_path / "b.png", "map")
    a, b = matplotlib.image.imread(tmp_path / "a.png"), matplotlib.image.imread(tmp_path / "b.png")
    assert a.shape[0] > 100 and a.shape[1] > 300 and not np.array_equal(a.shape, b.shape) or not np.array_equal(a, b)
    assert not list(tmp_path.glob(".a.png.*"))  # written under a temporary name, then renamed


def test_points_off_the_map_are_said_and_all_off_give_no_accuracy(tmp_path, caplog):
    """Half the labelled points moved off the map: the estimate comes from the rest, with a warning that
    counts them; all moved off: not enough evidence, never "OA nan"."""
    truth, mapped = _truth_and_map()
    map_path = _write_map(tmp_path / "map.tif", mapped)
    points = _label_from(sample_design.draw(map_path, sample_design.Design(target_se=0.02, min_per_class=30)), truth)
    frame = gpd.GeoDataFrame(points, geometry=gpd.points_from_xy(points["x"], points["y"]), crs=32631)
    half = frame.index % 2 == 1
    off = frame.assign(geometry=gpd.points_from_xy(points["x"] + np.where(half, 10_000, 0), points["y"], crs=32631))
    off.to_file(tmp_path / "half.gpkg")
    with caplog.at_level("WARNING", logger="lcflow"):
        r = assess.against_reference(map_path, tmp_path / "half.gpkg")
    n_off = int(half.sum())
    assert r["points_off_map"] == n_off and r["points_used"] == len(frame) - n_off
    assert any(m.getMessage() == f"reference file {tmp_path / 'half.gpkg'}: {n_off} of {len(frame)} labelled points lie "
               f"outside map {map_path} or on its nodata, and are left out (the estimate stands for the mapped area "
               "only)" for m in caplog.records)
    frame.assign(geometry=frame.geometry.translate(xoff=10_000)).to_file(tmp_path / "all.gpkg")
    r = assess.against_reference(map_path, tmp_path / "all.gpkg")
    assert "overall_accuracy" not in r and r["points_used"] == 0
    assert r["not_enough_evidence"].startswith("0 labelled points on the map, of 0 classes; an accuracy needs at least 50")
    assert assess.quote({"reference": r}).startswith("none: not enough evidence in reference")


@pytest.mark.parametrize("codes", [(1, 2), (100, 200)])
def test_a_map_of_the_users_own_codes_is_assessed_with_the_mapping_read_as_labels_reads_it(codes, tmp_path):
    """`assess --mapping own.csv --own-codes` (what the workflow passes with labels.reference): the user's own
    codes are classes, an overall accuracy with its interval comes out; read as CLC codes, 100 is refused."""
    import argparse

    from lcflow.labels.commands import nomenclature_of, nomenclature_options

    truth, mapped = _truth_and_map()
    own = np.where(np.isin(truth, [2, 3]), codes[0], codes[1]), np.where(np.isin(mapped, [2, 3]), codes[0], codes[1])
    write_cog(tmp_path / "map.tif", own[1].astype(np.uint8), GRID, nodata=255,
              tags={"class_names": {str(codes[0]): "vegetated", str(codes[1]): "other"}})
    (tmp_path / "own.csv").write_text(f"code,class_code,class_name\n{codes[0]},{codes[0]},vegetated\n"
                                      f"{codes[1]},{codes[1]},other\n")
    points = sample_design.draw(tmp_path / "map.tif", sample_design.Design(target_se=0.02, min_per_class=60))
    rows, cols = rasterio.transform.rowcol(GRID.transform, points["x"], points["y"])
    points = points.assign(reference=own[0][np.asarray(rows), np.asarray(cols)].astype(int))
    sample_design.write(points, tmp_path / "map.tif", tmp_path / "ref.gpkg", tmp_path / "ref.csv")
    parser = argparse.ArgumentParser()
    nomenclature_options(parser)
    nomen = nomenclature_of(parser.parse_args(["--mapping", str(tmp_path / "own.csv"), "--own-codes"]))
    assert sorted(nomen.names) == list(codes)
    result = assess.against_reference(tmp_path / "map.tif", tmp_path / "ref.gpkg", nomenclature=nomen)
    assert 0.8 < result["overall_accuracy"] <= 1 and 0 < result["overall_accuracy_ci95"] < 0.05
    if codes[0] >= 100:
        with pytest.raises(LcflowError, match=rf"clc_code {codes[0]} is not a CLC level-3 code"):
            nomenclature_of(parser.parse_args(["--mapping", str(tmp_path / "own.csv")]))
