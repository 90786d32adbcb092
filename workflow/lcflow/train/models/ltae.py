"""L-TAE: lightweight temporal attention over pixel series (after Garnot and Landrieu 2020).

As in the authors' reference implementation: the input (standardised by lcflow already: the reference
normalises its spatial encoder's output, which pixel series do not have) is projected to
``heads * head_width`` channels and normalised, given a sinusoidal encoding of each step's day of the year, and split
into one channel group per head; each head has a learned master query (no query from the data) that
attends over the time steps through keys of ``key_size`` projected from the series, and returns its
group's attention-weighted sum; the heads' outputs are concatenated and passed through an MLP. A small
MLP head classifies. Written here (about 40 lines of torch) rather than taken from torchgeo, whose copy
would bring Lightning, timm and kornia into every environment; the design is the paper's. A step's day
is its date's, counted from 1 January of the series' first year (the paper counts from the first
observation; from 1 January, a model trained on one year sees another year's steps on the same days);
samples without dates take the middle of equal parts of a year, as the cube's composites are.
"""

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from lcflow.common import time_steps
from lcflow.train.models.torch_model import TorchModel

#: the period of the positional encoding, in days (the paper's T)
PERIOD = 1000.0


def day_encoding(steps: int, width: int, dates: Sequence[dt.date] | None = None) -> torch.Tensor:
    """Sinusoidal encoding (steps, width) of each step's day (:func:`lcflow.common.time_steps.days`)."""
    days = torch.as_tensor(time_steps.days(steps, dates), dtype=torch.float64)
    rates = PERIOD ** (2 * (torch.arange(width, dtype=torch.float64) // 2) / width)
    angles = days[:, None] / rates[None, :]
    enc = torch.where(torch.arange(width) % 2 == 0, torch.sin(angles), torch.cos(angles))
    return enc.float()


@dataclass(frozen=True)
class Attention:
    """The network's size: its heads, the channels of each, their keys' size; the MLP's width and dropout."""

    heads: int
    head_width: int
    key_size: int
    hidden: int
    dropout: float

    @classmethod
    def of(cls, params: dict) -> "Attention":
        """The size a model's parameters give."""
        return cls(
            int(params["heads"]),
            int(params["head_width"]),
            int(params["key_size"]),
            int(params["hidden"]),
            float(params["dropout"]),
        )


class Network(nn.Module):
    def __init__(
        self,
        n_features: int,
        steps: int,
        n_classes: int,
        size: Attention,
        dates: Sequence[dt.date] | None = None,
    ):
        super().__init__()
        heads, head_width, key_size, hidden, dropout = (
            size.heads,
            size.head_width,
            size.key_size,
            size.hidden,
            size.dropout,
        )
        d_model = heads * head_width
        self.heads, self.key_size = heads, key_size
        self.in_proj = nn.Conv1d(n_features, d_model, 1)
        self.proj_norm = nn.LayerNorm((d_model, steps))
        # (steps, d_model)
        self.register_buffer("position", day_encoding(steps, head_width, dates).repeat(1, heads))
        self.query = nn.Parameter(torch.randn(heads, key_size) * math.sqrt(2.0 / key_size))
        self.keys = nn.Linear(d_model, heads * key_size)
        nn.init.normal_(self.keys.weight, 0.0, math.sqrt(2.0 / key_size))
        self.attention_dropout = nn.Dropout(dropout)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, hidden),
            nn.BatchNorm1d(hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.LayerNorm(hidden),
        )
        self.head = nn.Sequential(
            nn.Linear(hidden, hidden // 2),
            nn.BatchNorm1d(hidden // 2),
            nn.ReLU(),
            nn.Linear(hidden // 2, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        z = self.proj_norm(self.in_proj(x.transpose(1, 2))).transpose(1, 2)  # (b, t, d_model)
        z = z + self.position
        keys = self.keys(z).view(b, t, self.heads, self.key_size)  # (b, t, heads, key)
        scores = torch.einsum("hk,bthk->bht", self.query, keys) / math.sqrt(self.key_size)
        weights = self.attention_dropout(torch.softmax(scores, dim=-1))  # (b, heads, t)
        values = z.view(b, t, self.heads, -1)  # each head its own channel group
        pooled = torch.einsum("bht,bthc->bhc", weights, values).reshape(b, -1)
        return self.head(self.mlp(pooled))


class Model(TorchModel):
    def network(self) -> nn.Module:
        p = self.params
        return Network(
            self.n_features, self.steps, self.n_classes, Attention.of(p), self.step_dates()
        )
