"""Presto's encoder as its authors evaluate it on small tables: kept as published, a forest or a logistic
regression fitted on its embeddings (Tseng et al. 2023), beside lcflow's forest on its own input and a
forest on both, on the recipe grid's folds (``recipe_grid.py prepare DIR``: three 500-row draws of the real
Slovenia table, three of the demo's tile-years, 5 spatial folds each).

Each fold's train rows go through lcflow's preparation (gap filling, the observed flags, each pixel's
position) and through the encoder (``presto.Network.embed``, the 128 values its head classifies); the
forests are lcflow's ``rf`` model at its defaults (300 trees, ``sqrt`` features, seed 42); "random encoder" is the same
encoder from its seeded initial weights, what the published weights are measured against. Test rows
without any observation count as wrong, as lcflow scores every model. Prints a row a fit (read by
``recipe_grid.py summary DIR THIS_OUTPUT``, which sets each against lcflow's forest fold by fold) and the
seconds the encoder took.

Usage:
    python benchmarks/studies/presto_embeddings.py DIR [--only PREFIX] > RESULTS.jsonl
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from lcflow.labels import samples_table as samples
from lcflow.train.data import training_data
from lcflow.train.models import hyperparameters, presto, rf

sys.path.insert(0, str(Path(__file__).parent))
from recipe_grid import fold_row, fold_stems  # noqa: E402


def encoder(data: training_data.Prepared, pretrained: bool) -> torch.nn.Module:
    """presto's network for this fold's bands, standardisation and dates, from the published encoder or
    from its seeded initial weights, in inference mode."""
    table = data.table
    params = hyperparameters.defaults("presto") | {"pretrained": pretrained, "freeze_encoder": True}
    model = presto.Model(params, len(table.bands) + 1, table.steps, len(data.classes), table.bands,
                         data.standardise, table.meta.get("time_steps"))
    torch.manual_seed(int(params["seed"]))
    return model.network().eval()


def embeddings(net: torch.nn.Module, x: np.ndarray, batch: int = 256) -> np.ndarray:
    with torch.no_grad():
        return np.concatenate([net.embed(torch.from_numpy(x[i:i + batch])).numpy() for i in range(0, len(x), batch)])


class Forest:
    """lcflow's forest model at its defaults on one core, on whatever columns it is given (each a step of
    one feature: the forest flattens its input)."""

    def fit(self, x: np.ndarray, y: np.ndarray) -> "Forest":
        self.model = rf.Model(hyperparameters.defaults("rf") | {"n_jobs": 1}, 1, x.shape[1], int(y.max()) + 1)
        self.model.fit(x[:, :, None], y, None, None)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.model.predict_proba(x[:, :, None]).argmax(axis=1)


def fold(directory: Path, stem: str) -> list[dict]:
    path = directory / f"{stem}.parquet"
    data = training_data.prepare_data(presto.Model, "presto", [str(path)], hyperparameters.defaults("presto"), carve=False)
    test = samples.read(path).split("test")
    x_test = training_data.model_input(presto.Model, test, data.standardise, stem)  # as the model's own rows
    empty = ~test.observed()
    def flat(x):  # lcflow's forest input: the series without the position
        return x[..., :-2].reshape(len(x), -1)
    labels = np.asarray(data.classes)
    truth_labels = test.frame["label"].to_numpy()
    rows = []
    started = time.perf_counter()
    encoded = {}
    for name, pretrained in (("published", True), ("random", False)):
        net = encoder(data, pretrained)
        encoded[name] = embeddings(net, data.x), embeddings(net, x_test)
    encode_s = time.perf_counter() - started
    fits = [("forest", "forest on lcflow's input", Forest(), flat(data.x), flat(x_test)),
            ("forest", "forest on the embeddings", Forest(), *encoded["published"]),
            ("forest", "forest on lcflow's input and the embeddings", Forest(),
             np.hstack([flat(data.x), encoded["published"][0]]), np.hstack([flat(x_test), encoded["published"][1]])),
            ("logistic regression", "logistic regression on the embeddings",
             make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)), *encoded["published"]),
            ("forest", "forest on a random encoder's embeddings", Forest(), *encoded["random"])]
    for model, recipe, estimator, train_x, test_x in fits:
        start = time.perf_counter()
        estimator.fit(train_x, data.y)
        codes = np.where(empty, -1, labels[estimator.predict(test_x)])
        rows.append(fold_row(recipe, model, stem, codes, directory)
                    | {"oa": float((codes == truth_labels).mean()), "s": round(time.perf_counter() - start, 2),
                       "encode_s": round(encode_s, 2)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path, help="the folds recipe_grid.py prepare wrote")
    ap.add_argument("--only", default="", metavar="PREFIX", help="the folds whose names begin with PREFIX alone")
    args = ap.parse_args()
    torch.set_num_threads(1)
    stems = [s for s in fold_stems(args.dir) if s.startswith(args.only)]
    if not stems:
        raise SystemExit(f"{args.dir}: no prepared folds{' beginning ' + args.only if args.only else ''} "
                         "(run recipe_grid.py prepare first)")
    for stem in stems:
        for row in fold(args.dir, stem):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
