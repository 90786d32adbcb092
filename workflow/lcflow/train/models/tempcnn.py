"""TempCNN: 1-D convolutions over time (after Pelletier et al. 2019).

Three convolution blocks (convolution, batch normalisation, ReLU, dropout) keep the time axis; a
dense layer over the flattened result feeds the classifier.
"""

import torch
from torch import nn

from lcflow.train.models.torch_model import TorchModel


class Network(nn.Module):
    def __init__(
        self,
        n_features: int,
        steps: int,
        n_classes: int,
        filters: int,
        kernel_size: int,
        dense: int,
        dropout: float,
    ):
        super().__init__()
        blocks, width = [], n_features
        for _ in range(3):
            blocks += [
                nn.Conv1d(width, filters, kernel_size, padding=kernel_size // 2),
                nn.BatchNorm1d(filters),
                nn.ReLU(),
                nn.Dropout(dropout),
            ]
            width = filters
        self.conv = nn.Sequential(*blocks)
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(filters * steps, dense),
            nn.BatchNorm1d(dense),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(dense, n_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.conv(x.transpose(1, 2)))


class Model(TorchModel):
    def network(self) -> nn.Module:
        p = self.params
        return Network(
            self.n_features,
            self.steps,
            self.n_classes,
            int(p["filters"]),
            int(p["kernel_size"]),
            int(p["dense"]),
            float(p["dropout"]),
        )
