"""presto: the published encoder loads only as published (checksum, every key), its position and month
tables are the ones this encoder computes, masked tokens count for nothing, lcflow's input reaches it as
reflectance, NDVI, months and each pixel's latitude and longitude, and the model trains on two ranks and
maps a cube there as one process does, each pixel as the samples table's row of that pixel."""

import datetime as dt
import hashlib
import json
import re
import subprocess

import numpy as np
import pytest
import rasterio
import torch
from rasterio.windows import Window

from lcflow.common.features import Standardiser, prepare, with_position
from lcflow.common.position import to_latlon, window_latlon
from lcflow.errors import LcflowError
from lcflow.labels import samples_table
from lcflow.train import training
from lcflow.train.model_dirs.model_dir import TrainedModel
from lcflow.train.models import presto
from tests import real_tables

from .test_distributed import BIN, ENV, torchrun

BANDS = ["B02", "B03", "B04", "B05", "B06", "B07", "B08", "B8A", "B11", "B12"]


def test_the_published_encoder_loads_and_its_tables_are_the_ones_this_encoder_computes():
    """Position and month embeddings are fixed sinusoids in Presto: the published file holding exactly
    the tables this encoder computes says its tokens are laid out as the published model's were."""
    encoder = presto.Encoder()
    computed = {k: v.clone() for k, v in encoder.state_dict().items() if k in ("pos_embed", "month_embed.weight")}
    presto.load_encoder(encoder)
    for key, table in computed.items():
        assert torch.allclose(encoder.state_dict()[key], table, atol=1e-6), key
    assert sum(p.numel() for p in encoder.parameters()) == 404160  # the paper's "about 0.4 M"
    assert not torch.equal(encoder.blocks[0].attn.qkv.weight, presto.Encoder().blocks[0].attn.qkv.weight)


def test_weights_that_are_not_the_published_file_are_refused(tmp_path):
    changed = tmp_path / "default_model.pt"
    data = bytearray(presto.WEIGHTS.read_bytes())
    data[len(data) // 2] ^= 1
    changed.write_bytes(bytes(data))
    with pytest.raises(LcflowError, match=rf"Presto weights {re.escape(str(changed))}: sha256 \w+ is not the "
                                          rf"published file's {presto.WEIGHTS_SHA256}"):
        presto.load_encoder(presto.Encoder(), changed)
    # a file whose checksum is the one given, but not the encoder's keys
    state = torch.load(presto.WEIGHTS, map_location="cpu", weights_only=True)
    del state["encoder.norm.bias"]
    partial = tmp_path / "partial.pt"
    torch.save(state, partial)
    with pytest.raises(LcflowError, match=r"do not fit the encoder \(missing \['norm.bias'\], unexpected \[\]\)"):
        presto.load_encoder(presto.Encoder(), partial, hashlib.sha256(partial.read_bytes()).hexdigest())
    with pytest.raises(LcflowError, match="are missing"):
        presto.load_encoder(presto.Encoder(), tmp_path / "none.pt")


def test_masked_tokens_give_what_removing_them_gives():
    """The reference removes missing tokens from the sequence; a key mask must give the same embedding,
    per sample, whatever the others lack."""
    torch.manual_seed(0)
    encoder = presto.Encoder().eval()
    presto.load_encoder(encoder)
    b, t = 4, 12
    groups = {"S2_RGB": torch.rand(b, t, 3) * 0.3, "NDVI": torch.rand(b, t, 1)}
    observed = torch.rand(b, t) > 0.3
    observed[:, 0] = True
    latlon = torch.tensor([[52.0, 5.0], [46.1, 14.5], [-3.0, 120.0], [60.0, -20.0]])
    tokens, keep = encoder.tokens(groups, torch.arange(t), observed, latlon)
    assert tokens.shape == (b, 1 + 2 * t, 128) and keep[:, 0].all()
    masked = encoder.encode(tokens, keep)
    for i in range(b):
        kept = tokens[i:i + 1, keep[i]]
        removed = encoder.encode(kept, torch.ones(kept.shape[:2], dtype=torch.bool))
        assert torch.allclose(masked[i], removed[0], atol=1e-5), i
    assert not torch.allclose(masked, encoder.encode(tokens, torch.ones_like(keep)), atol=1e-3)


def test_steps_become_tokens_with_the_month_of_their_middle():
    pool, months = presto.step_months(12)
    assert np.array_equal(pool, np.eye(12)) and months.tolist() == list(range(12))
    assert presto.step_months(6)[1].tolist() == [1, 3, 5, 7, 9, 11]
    assert presto.step_months(24)[1].tolist() == [k // 2 for k in range(24)]
    pool, months = presto.step_months(68)  # more than the 24 positions the encoder has: monthly means
    assert pool.shape == (12, 68) and months.tolist() == list(range(12))
    assert np.allclose(pool.sum(1), 1) and ((pool > 0).sum(0) == 1).all()  # each step in exactly one month
    assert (pool > 0).sum(1).tolist() == [6, 5, 6, 6, 5, 6, 6, 5, 6, 6, 5, 6]


def test_dated_steps_become_tokens_of_their_own_months():
    day = dt.date.fromisoformat
    # up to 24 steps: one token each, in its date's month (not its index's)
    pool, months = presto.step_months(4, [day("2018-01-30"), day("2018-02-01"), day("2018-07-15"), day("2018-12-31")])
    assert np.array_equal(pool, np.eye(4)) and months.tolist() == [0, 1, 6, 11]
    # 36 steps in one year: one token per calendar month, the mean of its steps
    dates = [dt.date(2018, 1, 1) + dt.timedelta(days=10 * k) for k in range(36)]
    pool, months = presto.step_months(36, dates)
    assert months.tolist() == list(range(12)) and pool.shape == (12, 36)
    assert [np.flatnonzero(row).tolist() for row in pool[:3]] == [[0, 1, 2, 3], [4, 5], [6, 7, 8]]  # 1, 11, 21, 31 Jan; 10, 20 Feb
    # 40 steps over 20 calendar months (Jul 2016 to Feb 2018): 20 tokens, in time order
    dates = [dt.date(2016, 7, 1) + dt.timedelta(days=15 * k) for k in range(40)]
    pool, months = presto.step_months(40, dates)
    assert months.tolist() == [6, 7, 8, 9, 10, 11, *range(12), 0, 1] and np.allclose(pool.sum(1), 1)
    # the Slovenia series: 68 dates over 30 calendar months, more than the encoder's 24: its mean year
    frame, meta = real_tables.slovenia()
    dates = [day(d) for d in meta["time_steps"]]
    pool, months = presto.step_months(68, dates)
    assert months.tolist() == list(range(12))
    for m in range(12):
        assert {dates[k].month - 1 for k in np.flatnonzero(pool[m])} == {m}
    assert np.allclose(pool.sum(1), 1) and ((pool > 0).sum(0) == 1).all()
    net = presto.Network(["NDVI"], np.zeros(1), np.ones(1), 68, 3, 0.0, False, dates)
    assert torch.equal(net.pool, torch.as_tensor(pool)) and net.months.tolist() == list(range(12))


def test_the_encoder_gets_reflectance_ndvi_months_and_the_pixels_position():
    """Prepared (standardised) input in; the encoder sees reflectance / 10000 per group, NDVI from B08
    and B04 where the table has none, the observed steps and the position, as given."""
    rng = np.random.default_rng(0)
    raw = rng.uniform(100, 5000, (5, 12, len(BANDS))).astype(np.float32)
    raw[1, 3:5] = np.nan  # two cloudy steps
    standardise = Standardiser.fit(raw)
    standardise.clip = 1e9  # no clipping: values come back exactly
    prepared, _ = prepare(raw, standardise)
    latlon = to_latlon(np.array([640005.0] * 5), np.array([5760005.0] * 5), "EPSG:32631")
    net = presto.Network(BANDS, standardise.center, standardise.scale, 12, 3, 0.0, False).eval()
    seen = {}
    net.encoder.register_forward_pre_hook(lambda m, args: seen.update(zip(("groups", "months", "observed", "latlon"), args)))
    encoded = {}
    net.encoder.register_forward_hook(lambda m, args, out: encoded.update(out=out))
    x = torch.from_numpy(with_position(prepared, latlon))
    scores = net(x)
    with torch.no_grad():  # embed: the encoder's output, which the head classifies
        assert torch.equal(net.embed(x), encoded["out"]) and net.embed(x).shape == (5, 128)
        assert torch.equal(net.head(net.embed(x)), scores)
    filled = prepared[..., :len(BANDS)] * standardise.scale + standardise.center  # gaps filled in time
    assert list(seen["groups"]) == ["S2_RGB", "S2_Red_Edge", "S2_NIR_10m", "S2_NIR_20m", "S2_SWIR", "NDVI"]
    assert np.allclose(seen["groups"]["S2_RGB"].numpy(), filled[..., :3] / 10000, atol=1e-6)
    assert np.allclose(seen["groups"]["S2_SWIR"].numpy(), filled[..., 8:10] / 10000, atol=1e-6)
    nir, red = filled[..., 6], filled[..., 2]
    assert np.allclose(seen["groups"]["NDVI"][..., 0].numpy(), (nir - red) / (nir + red), atol=1e-5)
    assert seen["months"].tolist() == list(range(12))
    assert seen["observed"][1].tolist() == [k not in (3, 4) for k in range(12)] and seen["observed"][0].all()
    assert np.allclose(seen["latlon"].numpy(), latlon) and 51.9 < latlon[0, 0] < 52.1 and 4.9 < latlon[0, 1] < 5.1
    with pytest.raises(LcflowError, match="presto needs Sentinel-2 bands or NDVI; the samples have VV, VH"):
        presto.Network(["VV", "VH"], np.zeros(2), np.ones(2), 12, 3, 0.0, False)


def test_a_table_without_positions_is_refused_before_training(stages, tmp_path):
    table = samples_table.read(stages["samples2018"])
    path = tmp_path / "nowhere.parquet"
    samples_table.write(table.frame.drop(columns=["x", "y"]), path, table.meta)
    with pytest.raises(LcflowError, match=rf"{re.escape(str(path))} gives no position of its samples: it needs "
                                          "lat/lon columns, or x/y columns with a crs"):
        training.train("presto", [str(path)], tmp_path / "model", {"epochs": 1, "min_steps": 0})
    assert not (tmp_path / "model").exists()


#: side of the cube's north-west corner that the model maps (a transformer per pixel is slow on a CPU)
CORNER = 64


def _corner(cube, out, size: int):
    """The north-west ``size`` x ``size`` pixels of ``cube``, its tags and band names kept."""
    with rasterio.open(cube) as src:
        profile = {**src.profile, "width": size, "height": size, "transform": src.window_transform(Window(0, 0, size, size))}
        profile.pop("blockxsize", None), profile.pop("blockysize", None)
        profile["tiled"] = False
        with rasterio.open(out, "w", **profile) as dst:
            dst.write(src.read(window=Window(0, 0, size, size)))
            dst.update_tags(**src.tags())
            dst.descriptions = src.descriptions
    return out


@pytest.fixture(scope="module")
def presto_two_ranks(stages, tmp_path_factory):
    """presto fine-tuned on two torch ranks, briefly (60 steps of 2 x 64 samples)."""
    out = tmp_path_factory.mktemp("presto") / "model"
    log = out.parent / "train.log"
    torchrun(2, "--model", "presto", "--samples", str(stages["samples2018"]), "--out", str(out),
             "--set", "epochs=2", "--set", "min_steps=60", "--set", "evaluations=2", "--set", "threads=1",
             "--set", "batch_size=64", log=log)
    return out, log.read_text()


def test_presto_trains_on_two_ranks_and_maps_there_as_one_process_does(presto_two_ranks, stages, tmp_path):
    out, log = presto_two_ranks
    sums = dict(re.findall(r"rank=(\d) size=2 final weights sha256=(\w+)", log))
    assert set(sums) == {"0", "1"} and sums["0"] == sums["1"], log[-2000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["params"]["pretrained"] is True
    assert metrics["test"]["kappa"] > 0.3, metrics["test"]  # learnt beyond chance in 60 steps
    files = {n: {k: tmp_path / f"{n}_{k}.tif" for k in ("map", "confidence")} for n in (1, 2)}
    cube = _corner(stages["cube2018"], tmp_path / "cube.tif", CORNER)

    def args(n: int) -> list[str]:
        return ["--model-dir", str(out), "--cube", str(cube), "--out", str(files[n]["map"]),
                "--confidence", str(files[n]["confidence"]), "--block", "32"]

    alone = subprocess.run([str(BIN / "lcflow"), "predict", *args(1)], env=ENV, capture_output=True, text=True,
                           timeout=600)
    assert alone.returncode == 0, alone.stderr[-2000:]
    torchrun(2, *args(2), log=tmp_path / "predict.log", command="predict")
    for kind in ("map", "confidence"):
        assert files[2][kind].read_bytes() == files[1][kind].read_bytes(), kind
    # each sample's pixel in the map is what the model says of the table's row: the window's positions
    # are the rows' x/y, in degrees
    table = samples_table.read(stages["samples2018"])
    table = table.rows(((table.frame["row"] < CORNER) & (table.frame["col"] < CORNER)).to_numpy())
    trained = TrainedModel.load(out)
    codes, _, _ = trained.predict(table.features(trained.bands, trained.steps), table.latlon())
    with rasterio.open(files[1]["map"]) as src:
        mapped = src.read(1)[table.frame["row"], table.frame["col"]]
    assert len(codes) > 20 and (mapped == codes).mean() > 0.99, (len(codes), (mapped != codes).sum())
    with pytest.raises(LcflowError, match="model presto needs the position of each of the 3 samples"):
        trained.predict(table.features(trained.bands, trained.steps)[:3])


def test_cube_positions_are_pixel_centres_in_degrees(stages):
    with rasterio.open(stages["cube2018"]) as src:
        where = window_latlon(src.transform, src.crs, Window(3, 2, 4, 5))
        x, y = src.transform * (3 + 1.5, 2 + 0.5)  # row 0, col 1 of the window
        assert np.allclose(where[1], to_latlon(np.array([x]), np.array([y]), src.crs)[0])
    assert where.shape == (20, 2)


def test_a_frozen_encoder_trains_its_head_alone_in_one_process(stages, tmp_path):
    """freeze_encoder: the encoder's weights leave training as published; only the head learnt."""
    metrics = training.train("presto", [str(stages["samples2018"])], tmp_path / "frozen",
                             {"freeze_encoder": True, "epochs": 1, "min_steps": 10, "evaluations": 1, "threads": 1})
    assert metrics["world_size"] == 1 and metrics["params"]["freeze_encoder"] is True
    trained = TrainedModel.load(tmp_path / "frozen")
    net = trained.model.net
    published = presto.Encoder()
    presto.load_encoder(published)
    for key, value in published.state_dict().items():
        assert torch.equal(net.encoder.state_dict()[key].cpu(), value), key  # the model is on its GPU, if any
    torch.manual_seed(trained.model.params["seed"])  # the head as training drew it, before any step
    initial = trained.model.network()
    assert not torch.allclose(net.head[1].weight.cpu(), initial.head[1].weight)
