"""What checking a staged file costs on the login node: ``lcflow.retrieve.staged_file.verify`` of one
whole-tile 10 m band (10980 px a side, uint16, DEFLATE with a predictor in 1024 px tiles, as Earth Search's
COGs), where the item gives a ``file:checksum`` (a SHA-256 of the file) and where it gives none (every block
decoded), each set against the file's own transfer at a stated link rate.

    python benchmarks/staged_verify.py [--side 10980] [--turns 3] [--gbit 1]
"""

import argparse
import hashlib
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import rasterio

from lcflow.retrieve.staged_file import verify


def band(path: Path, side: int) -> Path:
    """A band of smooth fields and noise (reflectance-like, compressing about as a real band does)."""
    rng = np.random.default_rng(0)
    with rasterio.open(path, "w", driver="GTiff", width=side, height=side, count=1, dtype="uint16", tiled=True,
                       blockxsize=1024, blockysize=1024, compress="deflate", predictor=2, crs="EPSG:32631",
                       transform=rasterio.Affine(10, 0, 600000, 0, -10, 5800000), nodata=0) as dst:
        for row in range(0, side, 1024):
            h = min(1024, side - row)
            yy, xx = np.mgrid[row:row + h, 0:side]
            field = 1500 + 800 * np.sin(xx / 97.0) * np.cos(yy / 131.0) + (xx // 200 + yy // 150) % 7 * 120
            dst.write((field + rng.normal(0, 60, field.shape)).clip(1, 10000).astype(np.uint16), 1,
                      window=rasterio.windows.Window(0, row, side, h))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--side", type=int, default=10980)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--gbit", type=float, default=1.0, help="the link the transfer is set against, Gbit/s")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = band(Path(tmp) / "B04.tif", a.side)
        size = path.stat().st_size
        checksum = "1220" + hashlib.sha256(path.read_bytes()).hexdigest()
        times = {}
        for name, kwargs in (("with file:checksum (SHA-256)", {"checksum": checksum}),
                             ("without: every block decoded", {})):
            runs = []
            for _ in range(a.turns):
                began, cpu = time.perf_counter(), time.process_time()
                verify(path, "bench", size=size, **kwargs)
                runs.append((time.perf_counter() - began, time.process_time() - cpu))
            times[name] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
    transfer = size * 8 / (a.gbit * 1e9)
    print(f"# python benchmarks/staged_verify.py --side {a.side} --turns {a.turns} --gbit {a.gbit}  "
          f"(one band file, medians of {a.turns} turns)")
    print(f"one {a.side} px uint16 band, DEFLATE + predictor, 1024 px tiles: {size / 1e6:.1f} MB; "
          f"its transfer at {a.gbit:g} Gbit/s: {transfer:.2f} s")
    for name, (wall, cpu) in times.items():
        print(f"  {name:32s} {wall:6.2f} s wall, {cpu:6.2f} s CPU, {size / 1e6 / wall:7.1f} MB/s of file; "
              f"{wall / transfer:.2f} x its transfer")


if __name__ == "__main__":
    main()
