"""LSTM over pixel time series (after Sedona et al. 2022).

Input per time step: standardised band values and an "observed" flag; the outputs of the (optionally
bidirectional) LSTM stack over time, pooled (their mean plus the last; or an attention-weighted sum; or each
direction's state after the whole series, with or without the mean; or all of them side by side, each step's in
its place, as TempCNN flattens its convolutions' outputs), feed a linear classifier.
"""

from typing import cast

import torch
from torch import nn

from lcflow.train.models.torch_model import TorchModel


class Network(nn.Module):
    def __init__(
        self,
        n_features: int,
        n_classes: int,
        hidden_size: int,
        num_layers: int,
        bidirectional: bool,
        dropout: float,
        pooling: str = "mean_last",
        steps: int | None = None,
    ):
        super().__init__()
        self.lstm = nn.LSTM(
            n_features,
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        width = hidden_size * (2 if bidirectional else 1)
        self.pooling = pooling
        # additive attention (Bahdanau): a step's weight from its own output, softmax over the steps
        self.score = (
            nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 1))
            if pooling == "attention"
            else None
        )
        if pooling == "flatten":  # which date an output belongs to stays known to the classifier
            if not steps:
                raise ValueError("pooling=flatten needs the number of time steps")
            width *= steps
        self.head = nn.Sequential(
            nn.LayerNorm(width), nn.Dropout(dropout), nn.Linear(width, n_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, (h_n, _) = self.lstm(x)
        if self.pooling == "mean_last":
            return self.head(out.mean(dim=1) + out[:, -1])
        if self.pooling == "flatten":
            return self.head(out.flatten(1))
        if self.pooling == "attention":
            score = cast(nn.Module, self.score)  # made where the pooling is attention
            return self.head((torch.softmax(score(out), dim=1) * out).sum(dim=1))
        # h_n: the top layer's state of each direction after it has read the whole series
        final = torch.cat(list(h_n[-(2 if self.lstm.bidirectional else 1) :]), dim=1)
        return self.head(final if self.pooling == "final" else out.mean(dim=1) + final)


class Model(TorchModel):
    def network(self) -> nn.Module:
        p = self.params
        return Network(
            self.n_features,
            self.n_classes,
            int(p["hidden_size"]),
            int(p["num_layers"]),
            bool(p["bidirectional"]),
            float(p["dropout"]),
            str(p["pooling"]),
            self.steps,
        )
