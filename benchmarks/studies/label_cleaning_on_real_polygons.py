"""Label cleaning on real field polygons: does it help where labels are surveyed, not CORINE?

The eo-learn Slovenia patch (tests/data/eolearn_slovenia: 68 irregular NDVI dates, 40 % cloud, land-use
polygons of the agricultural register) goes through ``lcflow labels`` (the polygons, ``LULC_ID``) and
``lcflow sample`` twice per split seed: with the default cleaning (``sample.clean``) and without. A
Random Forest (scikit-learn, 300 trees, gaps filled in time) is trained on the train+val rows of each
and scored on the test rows, which neither touches (test rows are never cleaned). Prints, per seed and
on average: rows dropped per class, test overall and balanced accuracy, with and without cleaning.
"""

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import accuracy_score, balanced_accuracy_score

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))
sys.path.insert(0, str(ROOT))

from lcflow.common.features import fill_gaps  # noqa: E402
from lcflow.labels import alignment as labels  # noqa: E402
from lcflow.labels import nomenclature, sampling  # noqa: E402
from lcflow.labels.sample_settings import SampleSettings  # noqa: E402
from lcflow.labels.samples_table import read as read_samples  # noqa: E402
from tests import real_tables  # noqa: E402

DATA = ROOT / "tests" / "data" / "eolearn_slovenia"
MAPPING = {"name": "Slovenian land use", "ignore": [0],
           "classes": [{"class_code": c, "class_name": n, "codes": [c]} for c, n in real_tables.SLOVENIA_CLASSES.items()]}
SEEDS = range(5)


def build(work: Path) -> tuple[Path, Path, Path]:
    cube, valid = real_tables.slovenia_cube(work)
    (work / "map.yaml").write_text(yaml.safe_dump(MAPPING))
    source = labels.LabelSource(DATA / "LULC.gpkg", corine=False, code_column="LULC_ID")
    labels.run(source, cube, work / "labels.tif", nomenclature.from_mapping_file(work / "map.yaml", False))
    return cube, valid, work / "labels.tif"


def score(table_path: Path) -> tuple[float, float]:
    table = read_samples(table_path)
    x = np.nan_to_num(fill_gaps(table.features()), nan=0.0).reshape(len(table.frame), -1)
    y = table.frame["label"].to_numpy()
    fit = table.frame["split"].isin(["train", "val"]).to_numpy()
    test = table.frame["split"].eq("test").to_numpy()
    model = RandomForestClassifier(300, n_jobs=-1, random_state=0).fit(x[fit], y[fit])
    pred = model.predict(x[test])
    return accuracy_score(y[test], pred), balanced_accuracy_score(y[test], pred)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=len(SEEDS), help="split seeds to average over")
    seeds = range(ap.parse_args().seeds)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cube, valid, labels_tif = build(work)
        for seed in seeds:
            out = {}
            for name, clean in (("cleaned", {"reference_data": True}), ("as drawn", {"min_label_probability": 0})):
                path = work / f"{name}_{seed}.parquet"
                settings = SampleSettings(per_class=500, min_valid_fraction=0.3, block_px=20, seed=seed, min_per_class=0,
                                          clean=clean)
                frame = sampling.run(cube, valid, labels_tif, path, settings, tile="33TVM", year=2016)
                out[name] = score(path)
                if name == "cleaned":
                    checks = read_samples(path).meta["label_checks"]["per_class"]
                    dropped = {c: v.get("noisy", 0) for c, v in checks.items()}
                    judged = int(frame["split"].isin(["train", "val"]).sum())
            rows.append((seed, dropped, judged, out))
            print(f"seed {seed}: noisy dropped per class {dropped} (train/val rows kept {judged}); test OA / balanced "
                  f"cleaned {out['cleaned'][0]:.3f} / {out['cleaned'][1]:.3f}, as drawn {out['as drawn'][0]:.3f} / "
                  f"{out['as drawn'][1]:.3f}", flush=True)
    mean = {k: np.mean([r[3][k] for r in rows], axis=0) for k in ("cleaned", "as drawn")}
    print(f"mean over {len(rows)} splits: test OA cleaned {mean['cleaned'][0]:.3f} vs as drawn {mean['as drawn'][0]:.3f} "
          f"({mean['cleaned'][0] - mean['as drawn'][0]:+.3f}); balanced {mean['cleaned'][1]:.3f} vs "
          f"{mean['as drawn'][1]:.3f} ({mean['cleaned'][1] - mean['as drawn'][1]:+.3f})")


if __name__ == "__main__":
    main()
