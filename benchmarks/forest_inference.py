"""The same Random Forest's class probabilities through scikit-learn and through compiled inference
libraries, side by side on the same rows and cores: pixels per second, the ratio to scikit-learn, the
largest probability difference and how many pixels change class.

Engines: scikit-learn ``predict_proba``; lcflow's compiled traversal (``predict_engine: compiled``, what
lcflow predict runs by default: lcflow.train.models.compiled_forest); ONNX Runtime on the skl2onnx
conversion, with float32 input (the split thresholds first rounded down to float32, so that every
float32 value goes the way scikit-learn sends it: a plain conversion rounds to nearest and can flip a
split) and with float64 input (ai.onnx.ml opset 3: float64 thresholds, sums in float64); Treelite's
GTIL (its reference interpreter); with ``--compile``, tl2cgen's C code compiled by gcc (its compile
time is printed: 817 s on 2 cores for the demo forest, which it then mapped at 26.6 k px/s, under
scikit-learn's 118 k px/s).

Forests, 300 trees each, as lcflow trains them:
- demo: lcflow's rf trained on the demo samples, applied to the demo cube's pixels (prepared as predict
  prepares a window), 4 copies of the 256 x 256 cube;
- slovenia: a forest grown on every labelled pixel of the real Slovenia NDVI series (68 dates, gaps under
  clouds filled with 0 plus an observed flag per date: deep trees, ~1,000 nodes each), applied to the
  pixels 8 times with small noise.
Rows go in 65,536 at a time, the pixels of one 256 px prediction window. Every engine runs once a round
(``--rounds``, 3 by default), its ratio taken against scikit-learn's rate of the same round; the medians
over the rounds are printed (a shared 2-core machine's rate drifts by 10-20 % from minute to minute).

Usage: python benchmarks/forest_inference.py [--cases demo,slovenia] [--rounds 3] [--compile]
Needs ``pip install onnxruntime skl2onnx treelite tl2cgen`` (``make bench`` installs them).
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WINDOW = 65536


def demo_case(work: Path):
    import rasterio
    from shared import demo_cube

    from lcflow.maps.map_windows import window_features
    from lcflow.maps.predict import cube_layout
    from lcflow.train import training
    from lcflow.train.model_dirs.model_dir import TrainedModel

    cube, samples = demo_cube(work)
    training.train("rf", [str(samples)], work / "rf", {})
    trained = TrainedModel.load(work / "rf")
    bands, steps = cube_layout(cube)
    with rasterio.open(cube) as src:
        raw = src.read()
    prepared, _ = trained.window_inputs(window_features(raw, steps, trained.bands, bands))
    x = prepared.reshape(len(prepared), -1).astype(np.float32)
    return trained.model.forest, np.tile(x, (4, 1))


def slovenia_case(work: Path):
    from sklearn.ensemble import RandomForestClassifier

    from tests import real_tables

    frame, _ = real_tables.slovenia()
    values = frame[[c for c in frame if c.startswith("NDVI")]].to_numpy(np.float32)
    x = np.concatenate([np.nan_to_num(values, nan=0.0), np.isnan(values)], axis=1).astype(np.float32)
    forest = RandomForestClassifier(300, n_jobs=os.cpu_count(), random_state=0).fit(x, frame["label"].to_numpy())
    rows = np.tile(x, (8, 1))
    rows += np.random.default_rng(0).normal(0, 0.01, rows.shape).astype(np.float32)
    return forest, rows


def float32_thresholds(forest):
    """A copy of ``forest`` whose split thresholds are the largest float32 at or under each float64
    one: for float32 input, ``x <= t`` then holds exactly where it held before."""
    from copy import deepcopy

    from lcflow.train.models.compiled_forest import float32_at_or_under

    copy = deepcopy(forest)
    for tree in copy.estimators_:
        state = tree.tree_.__getstate__()
        state["nodes"]["threshold"] = float32_at_or_under(state["nodes"]["threshold"]).astype(np.float64)
        tree.tree_.__setstate__(state)
    return copy


def rate(predict, x: np.ndarray) -> tuple[float, np.ndarray]:
    """Pixels per second of ``predict`` over ``x`` in windows, and its probabilities."""
    start = time.perf_counter()
    out = [np.asarray(predict(x[i:i + WINDOW]), dtype=np.float64).reshape(min(WINDOW, len(x) - i), -1)
           for i in range(0, len(x), WINDOW)]
    return len(x) / (time.perf_counter() - start), np.concatenate(out)


def engines(forest, x: np.ndarray, cores: int, compile_c: bool, work: Path):
    """(name, set-up seconds, predict function) of each engine that is installed."""
    yield "scikit-learn", 0.0, forest.set_params(n_jobs=cores).predict_proba
    from lcflow.train.models.compiled_forest import CompiledForest

    start = time.perf_counter()
    compiled = CompiledForest(forest)
    compiled.predict_proba(x[:1], cores)  # compiled by numba (or loaded from its cache) on the first call
    yield "lcflow compiled", time.perf_counter() - start, lambda a: compiled.predict_proba(a, cores)
    try:
        import onnxruntime as ort
        from skl2onnx import to_onnx
    except ImportError as exc:
        print(f"  onnxruntime: not installed ({exc})")
    else:
        for name, dtype, converted in (("onnxruntime f32", np.float32, float32_thresholds(forest)),
                                       ("onnxruntime f64", np.float64, forest)):
            start = time.perf_counter()
            onx = to_onnx(converted, x[:1].astype(dtype), options={"zipmap": False},
                          target_opset={"": 17, "ai.onnx.ml": 3})
            options = ort.SessionOptions()
            options.intra_op_num_threads = cores
            session = ort.InferenceSession(onx.SerializeToString(), options, providers=["CPUExecutionProvider"])
            yield (name, time.perf_counter() - start,
                   lambda a, s=session, d=dtype: s.run(["probabilities"], {s.get_inputs()[0].name: a.astype(d)})[0])
    try:
        import treelite
        import treelite.gtil
    except ImportError as exc:
        print(f"  treelite: not installed ({exc})")
        return
    start = time.perf_counter()
    model = treelite.sklearn.import_model(forest)
    yield ("treelite gtil", time.perf_counter() - start,
           lambda a: treelite.gtil.predict(model, a.astype(np.float64), nthread=cores))
    if compile_c:
        import tl2cgen

        start = time.perf_counter()
        tl2cgen.export_lib(model, toolchain="gcc", libpath=str(work / "forest.so"),
                           params={"parallel_comp": cores}, nthread=cores)
        predictor = tl2cgen.Predictor(str(work / "forest.so"), nthread=cores)
        yield ("tl2cgen (gcc)", time.perf_counter() - start,
               lambda a: predictor.predict(tl2cgen.DMatrix(a.astype(np.float64))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="demo,slovenia")
    ap.add_argument("--rounds", type=int, default=3, help="runs of every engine, taking turns")
    ap.add_argument("--compile", action="store_true", help="also compile the forest to C with tl2cgen (slow)")
    args = ap.parse_args()
    cores = len(os.sched_getaffinity(0))
    cases = {"demo": demo_case, "slovenia": slovenia_case}
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases.split(","):
            forest, x = cases[case](Path(tmp))
            nodes = sum(t.tree_.node_count for t in forest.estimators_) / len(forest.estimators_)
            print(f"{case}: {len(forest.estimators_)} trees, {nodes:.0f} nodes a tree, {x.shape[1]} features, "
                  f"{forest.n_classes_} classes; {len(x)} px, {cores} cores")
            print(f"  {'engine':<15} {'set-up s':>9} {'px/s':>9} {'x sklearn':>9} {'max |dp|':>9} {'class changes':>13}")
            prepared = list(engines(forest, x, cores, args.compile, Path(tmp)))
            rates: dict[str, list[float]] = {name: [] for name, _, _ in prepared}
            ratios: dict[str, list[float]] = {name: [] for name, _, _ in prepared}
            worst: dict[str, tuple[float, int]] = {}
            for _ in range(args.rounds):
                base = reference = None
                for name, _, predict in prepared:
                    px_s, proba = rate(predict, x)
                    if reference is None:
                        base, reference = px_s, proba
                    rates[name].append(px_s)
                    ratios[name].append(px_s / base)
                    # lcflow keeps float32 probabilities: classes as its maps would show them
                    changed = int((proba.astype(np.float32).argmax(1) != reference.astype(np.float32).argmax(1)).sum())
                    before = worst.get(name, (0.0, 0))
                    worst[name] = (max(before[0], float(np.abs(proba - reference).max())), max(before[1], changed))
            for name, setup, _ in prepared:
                print(f"  {name:<15} {setup:>9.1f} {np.median(rates[name]):>9.0f} {np.median(ratios[name]):>9.2f} "
                      f"{worst[name][0]:>9.1e} {worst[name][1]:>13}   rounds: "
                      + " ".join(f"{r:.2f}" for r in ratios[name]), flush=True)


if __name__ == "__main__":
    main()
