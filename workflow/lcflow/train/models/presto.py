"""Presto (Tseng et al. 2023): a transformer encoder of monthly pixel series pretrained on millions of
Sentinel-1/2, ERA5 and SRTM series, here fine-tuned (or, with ``freeze_encoder``, kept as it is under a
trained head) to classify land cover.

The published encoder weights ship with lcflow (``presto_weights/``, MIT, from nasaharvest/presto) and
their sha256 is checked before they are loaded; every key of the published encoder must match this
network's. The encoder is written here after the paper and its reference code, with one difference:
tokens lcflow has no data for are left out of attention by a per-sample key mask rather than removed
from the sequence, which the reference can only do when every sample lacks the same number of tokens.
For the tokens kept, the two give the same embedding (tests/train/test_presto.py checks it).

What the encoder sees, from lcflow's prepared input: each Sentinel-2 group (RGB, red edge, NIR 10 m,
NIR 20 m, SWIR) whose bands the model has, as reflectance / 10000 (the standardisation undone, gaps
filled in time as for every model); NDVI (the table's, else computed from B08 and B04); the month of
each step, from the samples' dates (without dates, steps are equal parts of a year, as lcflow's cubes
are); and each pixel's latitude and longitude. The encoder's position table holds 24 tokens: a series
of more steps is averaged per calendar month, and over more than 24 calendar months per month of the
year (a series of several years then becomes its mean year). Sentinel-1, ERA5, SRTM and Dynamic World
tokens are masked, as are the tokens of steps with no observation.
"""

import datetime as dt
import hashlib
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from lcflow.errors import LcflowError
from lcflow.train.models.torch_model import TorchModel

WEIGHTS = Path(__file__).parent / "presto_weights" / "default_model.pt"
WEIGHTS_SHA256 = "559c9d76f525bdf2dd3774da8b1e7f1510769b73baacac12e9e4d8d5c67fbe65"

#: the encoder's channel groups in its order (the order indexes its channel embedding), with the lcflow
#: bands of each; None: a group lcflow never has (always masked)
GROUPS: dict[str, tuple[str, ...] | None] = {
    "S1": None,
    "S2_RGB": ("B02", "B03", "B04"),
    "S2_Red_Edge": ("B05", "B06", "B07"),
    "S2_NIR_10m": ("B08",),
    "S2_NIR_20m": ("B8A",),
    "S2_SWIR": ("B11", "B12"),
    "ERA5": None,
    "SRTM": None,
    "NDVI": ("NDVI",),
}
GROUP_WIDTH = {
    "S1": 2,
    "S2_RGB": 3,
    "S2_Red_Edge": 3,
    "S2_NIR_10m": 1,
    "S2_NIR_20m": 1,
    "S2_SWIR": 2,
    "ERA5": 2,
    "SRTM": 2,
    "NDVI": 1,
}
DYNAMIC_WORLD_CLASSES = 9
MAX_STEPS = 24
#: lcflow's reflectance scale (DN = reflectance x 10000), the encoder's input being reflectance
REFLECTANCE_SCALE = 10000.0


def sinusoid_table(positions: int, width: int, period: float = 1000.0) -> torch.Tensor:
    """(positions, width): sin at even channels, cos at odd ones, of position / period^(2 (i // 2) / width)."""
    angles = torch.arange(positions, dtype=torch.float64)[:, None] / period ** (
        2 * (torch.arange(width, dtype=torch.float64) // 2) / width
    )
    return torch.where(torch.arange(width) % 2 == 0, torch.sin(angles), torch.cos(angles)).float()


def month_table(width: int) -> torch.Tensor:
    """(12, width): the sine of each month's angle on the circle in the first half, its cosine in the second."""
    angles = torch.arange(12, dtype=torch.float64) * 2 * math.pi / 12
    half = width // 2
    return torch.cat(
        [torch.sin(angles)[:, None].expand(12, half), torch.cos(angles)[:, None].expand(12, half)],
        dim=1,
    ).float()


def cartesian(latlon: torch.Tensor) -> torch.Tensor:
    """(n, 2) latitude, longitude in degrees -> (n, 3) the point on the unit sphere."""
    lat, lon = torch.deg2rad(latlon[:, 0]), torch.deg2rad(latlon[:, 1])
    return torch.stack(
        [torch.cos(lat) * torch.cos(lon), torch.cos(lat) * torch.sin(lon), torch.sin(lat)], dim=-1
    )


class Attention(nn.Module):
    """Multi-head self-attention whose keys can be masked per sample."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])
        return self.proj(out.transpose(1, 2).reshape(b, n, c))


class Mlp(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block."""

    def __init__(self, width: int, heads: int, mlp_ratio: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.mlp = Mlp(width, width * mlp_ratio)

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), keep)
        return x + self.mlp(self.norm2(x))


class Encoder(nn.Module):
    """Presto's encoder (the published model's sizes): one token per channel group and time step, plus
    one for the location; embeddings of month, channel group and position concatenated and added."""

    def __init__(self, width: int = 128, depth: int = 2, heads: int = 8, mlp_ratio: int = 4):
        super().__init__()
        self.eo_patch_embed = nn.ModuleDict(
            {g: nn.Linear(n, width) for g, n in GROUP_WIDTH.items()}
        )
        # in the published weights; always masked
        self.dw_embed = nn.Embedding(DYNAMIC_WORLD_CLASSES + 1, width)
        self.latlon_embed = nn.Linear(3, width)
        self.blocks = nn.ModuleList([Block(width, heads, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(width)
        quarter = width // 4
        self.pos_embed = nn.Parameter(
            sinusoid_table(MAX_STEPS, width - 2 * quarter)[None], requires_grad=False
        )
        self.month_embed = nn.Embedding.from_pretrained(month_table(quarter), freeze=True)
        self.channel_embed = nn.Embedding(len(GROUPS) + 1, quarter)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(
        self,
        groups: dict[str, torch.Tensor],
        months: torch.Tensor,
        observed: torch.Tensor,
        latlon: torch.Tensor,
    ) -> torch.Tensor:
        """``groups``: name -> (b, t, its width) values; ``months`` (t,) 0..11; ``observed`` (b, t);
        ``latlon`` (b, 2) degrees -> (b, width), the mean of the kept tokens, normalised."""
        return self.encode(*self.tokens(groups, months, observed, latlon))

    def tokens(
        self,
        groups: dict[str, torch.Tensor],
        months: torch.Tensor,
        observed: torch.Tensor,
        latlon: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The location token, then one token per group and step, embedded; and which to keep."""
        b, t = observed.shape
        order = list(GROUPS)
        tokens, keep = (
            [self.latlon_embed(cartesian(latlon))[:, None]],
            [torch.ones_like(observed[:, :1])],
        )
        for name, values in groups.items():
            channel = self.channel_embed.weight[order.index(name)].expand(b, t, -1)
            position = torch.cat(
                [
                    self.month_embed(months).expand(b, t, -1),
                    channel,
                    self.pos_embed[0, :t].expand(b, t, -1),
                ],
                dim=-1,
            )
            tokens.append(self.eo_patch_embed[name](values) + position)
            keep.append(observed)
        return torch.cat(tokens, dim=1), torch.cat(keep, dim=1)

    def encode(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """Tokens (b, n, width) of which ``keep`` (b, n) enter attention -> the normalised mean of those kept."""
        for block in self.blocks:
            x = block(x, keep)
        weights = keep.to(x.dtype)[..., None]
        return self.norm((x * weights).sum(1) / weights.sum(1))


def load_encoder(encoder: Encoder, path: Path = WEIGHTS, sha256: str = WEIGHTS_SHA256) -> None:
    """The published encoder weights into ``encoder``, after checking the file's checksum and that
    every key and shape matches."""
    if not path.exists():
        raise LcflowError(
            f"Presto weights {path} are missing (they ship with lcflow: reinstall it)"
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise LcflowError(
            f"Presto weights {path}: sha256 {digest} is not the published file's {sha256}"
        )
    state = torch.load(path, map_location="cpu", weights_only=True)
    published = {
        k.removeprefix("encoder."): v for k, v in state.items() if k.startswith("encoder.")
    }
    own = encoder.state_dict()
    if set(published) != set(own) or any(published[k].shape != own[k].shape for k in own):
        missing, extra = sorted(set(own) - set(published)), sorted(set(published) - set(own))
        raise LcflowError(
            f"Presto weights {path} do not fit the encoder (missing {missing}, unexpected {extra})"
        )
    encoder.load_state_dict(published)


def step_months(
    steps: int, dates: Sequence[dt.date] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Tokens of a series of ``steps``: the (tokens, steps) averaging matrix and each token's month
    (0..11). Up to 24 steps one token each, in its date's month (without dates, the month of the middle
    of its equal part of a year); more, one token per calendar month, or where those are more than 24,
    per month of the year."""
    if dates is None:
        month = np.floor((np.arange(steps) + 0.5) * 12 / steps).astype(np.int64)
        calendar_month = month
    else:
        month = np.array([d.month - 1 for d in dates], dtype=np.int64)
        calendar_month = np.array([12 * d.year + d.month - 1 for d in dates], dtype=np.int64)
    if steps <= MAX_STEPS:
        return np.eye(steps, dtype=np.float32), month
    groups = np.unique(calendar_month)
    if len(groups) <= MAX_STEPS:
        pool = (calendar_month[None, :] == groups[:, None]).astype(np.float32)
        token_month = groups % 12
    else:
        token_month = np.unique(month)
        pool = (month[None, :] == token_month[:, None]).astype(np.float32)
    return pool / pool.sum(1, keepdims=True), token_month


class Network(nn.Module):
    """lcflow's prepared input (b, steps, bands + observed flag + lat + lon) -> class scores."""

    def __init__(
        self,
        bands: list[str],
        center: np.ndarray,
        scale: np.ndarray,
        steps: int,
        n_classes: int,
        dropout: float,
        freeze_encoder: bool,
        dates: Sequence[dt.date] | None = None,
    ):
        super().__init__()
        self.encoder = Encoder()
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(128, n_classes))
        self.freeze_encoder = freeze_encoder
        if freeze_encoder:
            self.encoder.requires_grad_(False)
        self.groups = {
            g: [bands.index(b) for b in members]
            for g, members in GROUPS.items()
            if members and all(b in bands for b in members)
        }
        self.ndvi_from = None
        if "NDVI" not in self.groups and {"B08", "B04"} <= set(bands):
            self.ndvi_from = (bands.index("B08"), bands.index("B04"))
        if not self.groups and self.ndvi_from is None:
            raise LcflowError(
                f"presto needs Sentinel-2 bands or NDVI; the samples have {', '.join(bands)}"
            )
        divisor = np.array(
            [1.0 if b == "NDVI" else REFLECTANCE_SCALE for b in bands], dtype=np.float32
        )
        self.n_bands = len(bands)
        self.register_buffer("center", torch.as_tensor(center / divisor, dtype=torch.float32))
        self.register_buffer("scale", torch.as_tensor(scale / divisor, dtype=torch.float32))
        pool, months = step_months(steps, dates)
        self.register_buffer("pool", torch.as_tensor(pool))
        self.register_buffer("months", torch.as_tensor(months))

    def train(self, mode: bool = True):
        super().train(mode)
        if self.freeze_encoder:
            self.encoder.eval()  # a frozen encoder keeps its dropout-free, inference behaviour
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x))

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The encoder's output (b, 128) for lcflow's prepared input: what the head classifies, and what
        Presto's authors fit forests and linear models on (benchmarks/studies/presto_embeddings.py)."""
        nb = self.n_bands
        values = torch.einsum("kt,btc->bkc", self.pool, x[..., :nb] * self.scale + self.center)
        observed = torch.einsum("kt,bt->bk", self.pool, x[..., nb]) > 0
        latlon = x[:, 0, nb + 1 : nb + 3]
        groups = {g: values[..., idx] for g, idx in self.groups.items()}
        if self.ndvi_from is not None:
            nir, red = values[..., self.ndvi_from[0]], values[..., self.ndvi_from[1]]
            total = nir + red
            groups["NDVI"] = torch.where(total > 0, (nir - red) / total.clamp_min(1e-6), 0.0)[
                ..., None
            ]
        groups = {g: groups[g] for g in GROUPS if g in groups}  # the encoder's order
        return self.encoder(groups, self.months, observed, latlon)


class Model(TorchModel):
    uses_position = True
    # each pixel's attention matrices: in batches of 8192 they leave a CPU's caches (796 px/s on 2 cores
    # against 1,260 at 256); a GPU wants large batches
    predict_batch = {"cpu": 256, "cuda": 8192}

    def architecture(self) -> nn.Module:
        p = self.params
        if self.bands is None or self.standardise is None:
            raise LcflowError("presto needs the model's bands and standardisation")
        return Network(
            self.bands,
            self.standardise.center,
            self.standardise.scale,
            self.steps,
            self.n_classes,
            float(p["dropout"]),
            bool(p["freeze_encoder"]),
            self.step_dates(),
        )

    def network(self) -> nn.Module:
        """For training: the architecture, starting from the published encoder unless ``pretrained`` is off
        (a trained model's own weights load into the bare architecture, without reading the file again)."""
        net = self.architecture()
        if self.params["pretrained"]:
            load_encoder(net.encoder)
        return net
