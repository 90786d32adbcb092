"""ResNet over spatial patches, time steps stacked as channels (BigEarthNet-style input).

Basic residual blocks (He et al. 2016) at full resolution, no pooling: the network is fully
convolutional and the class of a patch is read at its centre pixel. A block adds 2 pixels to the
receptive radius (the stem 1), so as long as the patch is at least ``2 * radius + 1`` wide the centre
never sees the patch border's zero padding: classifying a patch and running the network once over a
whole window (with a halo of ``radius`` pixels) give the same answer, and a tile is mapped in one
pass per window instead of one patch per pixel.
"""

import numpy as np
import torch
from torch import nn

from lcflow.errors import LcflowError
from lcflow.train.models.torch_model import TorchModel


class Residual(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.body(x))


class Network(nn.Module):
    def __init__(
        self, in_channels: int, n_classes: int, channels: int, blocks: int, dropout: float
    ):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(),
        )
        self.blocks = nn.Sequential(*[Residual(channels) for _ in range(blocks)])
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Conv2d(channels, n_classes, 1))
        self.radius = 1 + 2 * blocks

    def dense(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, channels, rows, cols) -> logits (batch, classes, rows, cols)."""
        return self.head(self.blocks(self.stem(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Patches -> logits of their centre pixels."""
        r, c = x.shape[-2] // 2, x.shape[-1] // 2
        return self.dense(x)[:, :, r, c]


class Model(TorchModel):
    input_kind = "patch"

    def network(self) -> nn.Module:
        p = self.params
        return Network(
            self.n_features * self.steps,
            self.n_classes,
            int(p["channels"]),
            int(p["blocks"]),
            float(p["dropout"]),
        )

    @property
    def halo(self) -> int:
        """Pixels of context each side that a prediction needs."""
        return 1 + 2 * int(self.params["blocks"])

    def fit(self, x, y, x_val, y_val):
        if x.ndim != 4 or x.shape[-1] < 2 * self.halo + 1:
            raise LcflowError(
                f"resnet with {self.params['blocks']} block(s) sees {self.halo} px around a sample: "
                f"it needs patches of at least {2 * self.halo + 1} px (sample.patch_px); "
                f"these are {x.shape[-1] if x.ndim == 4 else 'not'} patches"
            )
        return super().fit(x, y, x_val, y_val)

    def predict_dense(self, x: np.ndarray) -> np.ndarray:
        """(channels, rows, cols) prepared window -> class probabilities (classes, rows, cols)."""
        net = self.net.to(self.device).eval()
        with (
            torch.no_grad(),
            torch.autocast(
                self.device.type, dtype=torch.bfloat16, enabled=self.device.type == "cuda"
            ),
        ):
            logits = net.dense(torch.from_numpy(x[None]).to(self.device))
        return self.corrected(torch.softmax(logits.float(), dim=1)[0].cpu().numpy(), axis=0)
