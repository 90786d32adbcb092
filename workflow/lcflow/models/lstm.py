"""LSTM over pixel time series (after Sedona et al. 2022), in PyTorch.

Input per time step: standardised band values and an "observed" flag; the last hidden state of the
(optionally bidirectional) stack feeds a linear classifier.
"""

import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from . import Model as Base


class Network(nn.Module):
    def __init__(self, n_features: int, n_classes: int, hidden_size: int, num_layers: int, bidirectional: bool, dropout: float):
        super().__init__()
        self.lstm = nn.LSTM(n_features, hidden_size, num_layers=num_layers, batch_first=True,
                            bidirectional=bidirectional, dropout=dropout if num_layers > 1 else 0.0)
        width = hidden_size * (2 if bidirectional else 1)
        self.head = nn.Sequential(nn.LayerNorm(width), nn.Dropout(dropout), nn.Linear(width, n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out.mean(dim=1) + out[:, -1])


class Model(Base):
    defaults = {"hidden_size": 64, "num_layers": 2, "bidirectional": True, "dropout": 0.2, "epochs": 40,
                "batch_size": 256, "learning_rate": 0.003, "weight_decay": 0.0001, "patience": 8, "seed": 42,
                "threads": 0}
    weights_file = "model.pt"

    def _network(self) -> Network:
        p = self.params
        return Network(self.n_features, self.n_classes, int(p["hidden_size"]), int(p["num_layers"]),
                       bool(p["bidirectional"]), float(p["dropout"]))

    def fit(self, x, y, x_val, y_val, class_weight):
        p = self.params
        if int(p["threads"]) > 0:
            torch.set_num_threads(int(p["threads"]))
        torch.manual_seed(int(p["seed"]))
        rng = np.random.default_rng(int(p["seed"]))
        self.net = self._network()
        opt = torch.optim.AdamW(self.net.parameters(), lr=float(p["learning_rate"]), weight_decay=float(p["weight_decay"]))
        epochs = int(p["epochs"])
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=float(p["learning_rate"]), epochs=epochs,
                                                    steps_per_epoch=max(1, -(-len(x) // int(p["batch_size"]))))
        loss_fn = nn.CrossEntropyLoss(weight=torch.as_tensor(class_weight, dtype=torch.float32))
        xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
        history, best, best_state, waited = [], -1.0, None, 0
        for epoch in range(1, epochs + 1):
            self.net.train()
            start, total, correct, seen = time.perf_counter(), 0.0, 0, 0
            for idx in np.array_split(rng.permutation(len(x)), max(1, -(-len(x) // int(p["batch_size"])))):
                bi = torch.from_numpy(idx)
                logits = self.net(xt[bi])
                loss = loss_fn(logits, yt[bi])
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                total += float(loss) * len(idx)
                correct += int((logits.argmax(1) == yt[bi]).sum())
                seen += len(idx)
            row = {"epoch": epoch, "loss": total / seen, "accuracy": correct / seen,
                   "learning_rate": sched.get_last_lr()[0], "samples_per_s": seen / (time.perf_counter() - start)}
            if x_val is not None and len(x_val):
                proba = self.predict_proba(x_val)
                row["val_accuracy"] = float((proba.argmax(1) == y_val).mean())
                row["val_loss"] = float(nn.functional.nll_loss(torch.log(torch.from_numpy(proba) + 1e-9),
                                                               torch.from_numpy(y_val.astype(np.int64))))
                if row["val_accuracy"] > best:
                    best, waited = row["val_accuracy"], 0
                    best_state = {k: v.clone() for k, v in self.net.state_dict().items()}
                else:
                    waited += 1
            history.append(row)
            if x_val is not None and len(x_val) and waited >= int(p["patience"]):
                break
        if best_state is not None:
            self.net.load_state_dict(best_state)
        return history

    @torch.no_grad()
    def predict_proba(self, x, batch_size: int = 8192):
        self.net.eval()
        out = [torch.softmax(self.net(torch.from_numpy(x[i:i + batch_size])), dim=1).numpy()
               for i in range(0, len(x), batch_size)]
        return np.concatenate(out) if out else np.zeros((0, self.n_classes), dtype=np.float32)

    def save(self, directory: Path) -> None:
        torch.save(self.net.state_dict(), directory / self.weights_file)

    def load_weights(self, directory: Path) -> None:
        self.net = self._network()
        self.net.load_state_dict(torch.load(directory / self.weights_file, map_location="cpu", weights_only=True))
