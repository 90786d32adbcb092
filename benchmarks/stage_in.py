"""The stage-in's transfer rate against a server that behaves like a distant one: every answer waits
``--delay-ms`` and each connection sends at most ``--rate-mbs`` MB/s (tests/http_server.py, a process of its
own). A tile-year's worth of band files (synthetic GeoTIFFs, ``--gb`` in all) is staged with ``lcflow stage``'s
fetcher (urllib3) at each number of connections, and with obstore (Rust's object_store) for comparison; the
rate is set against N x the per-connection cap.

    python benchmarks/stage_in.py [--gb 2] [--connections 4,8] [--delay-ms 50] [--rate-mbs 25]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import rasterio

from lcflow.retrieve.download import Asset, Fetcher
from lcflow.retrieve.remote import Network

ROOT = Path(__file__).resolve().parents[1]
#: pixels a side of one band file (uint16, uncompressed): 88 MB, about a 10 m band of a whole tile's fifth
SIDE = 6656


def band_files(folder: Path, total_bytes: float) -> list[Path]:
    """Uncompressed tiled GeoTIFFs of noise, SIDE px a side, enough of them to hold ``total_bytes``."""
    folder.mkdir(parents=True, exist_ok=True)
    n = max(1, int(np.ceil(total_bytes / (SIDE * SIDE * 2))))
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        path = folder / f"band_{i:02d}.tif"
        if not path.exists():
            with rasterio.open(path, "w", driver="GTiff", width=SIDE, height=SIDE, count=1, dtype="uint16",
                               tiled=True, blockxsize=1024, blockysize=1024, crs="EPSG:32631",
                               transform=rasterio.Affine(10, 0, 600000, 0, -10, 5800000)) as dst:
                for row in range(0, SIDE, 1024):
                    h = min(1024, SIDE - row)
                    dst.write(rng.integers(0, 10000, (h, SIDE), dtype=np.uint16), 1,
                              window=rasterio.windows.Window(0, row, SIDE, h))
        paths.append(path)
    return paths


def with_urllib3(url: str, names: list[str], dest: Path, connections: int) -> None:
    """lcflow stage's fetcher: each file resumable and verified, ``connections`` at a time."""
    fetcher = Fetcher(Network(timeout_s=60, retries=2), connections)
    assets = [Asset(name, f"{url}/{name}", dest / name) for name in names]
    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(fetcher.fetch, assets))


def with_obstore(url: str, names: list[str], dest: Path, connections: int) -> None:
    """obstore's HTTP store, a file a thread, streamed to disk (no resume, no verification)."""
    import obstore
    from obstore.store import HTTPStore

    store = HTTPStore.from_url(url, client_options={"allow_http": True, "timeout": "60s"})

    def one(name: str) -> None:
        with (dest / name).open("wb") as out:
            for chunk in obstore.get(store, name).stream(min_chunk_size=1 << 20):
                out.write(chunk)

    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(one, names))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=2.0, help="GB of band files staged")
    ap.add_argument("--connections", default="4,8")
    ap.add_argument("--delay-ms", type=float, default=50.0)
    ap.add_argument("--rate-mbs", type=float, default=25.0, help="MB/s a connection")
    ap.add_argument("--work", type=Path, help="folder for the band files (default: a temporary one)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="stage-in-"))
    files = band_files(work / "served", a.gb * 1e9)
    total = sum(p.stat().st_size for p in files)
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "http_server.py"), str(work / "served"),
                               "--delay-s", str(a.delay_ms / 1000), "--rate", str(a.rate_mbs * 1e6)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    url = server.stdout.readline().strip()
    print(f"# {os.cpu_count()} cores; {len(files)} files, {total / 1e9:.2f} GB; the server waits {a.delay_ms:g} ms "
          f"before each answer and sends at most {a.rate_mbs:g} MB/s a connection")
    print(f"{'client':>8} {'N':>3} {'seconds':>8} {'MB/s':>7} {'of N x cap':>10}")
    try:
        for n in map(int, a.connections.split(",")):
            for name, fetch in (("urllib3", with_urllib3), ("obstore", with_obstore)):
                dest = work / "staged"
                shutil.rmtree(dest, ignore_errors=True)
                dest.mkdir()
                began = time.perf_counter()
                fetch(url, [p.name for p in files], dest, n)
                took = time.perf_counter() - began
                assert sum(p.stat().st_size for p in dest.iterdir()) == total
                rate = total / took / 1e6
                print(f"{name:>8} {n:>3} {took:>8.1f} {rate:>7.1f} {rate / (n * a.rate_mbs):>10.0%}", flush=True)
                shutil.rmtree(dest)
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        if not a.work:
            shutil.rmtree(work)


if __name__ == "__main__":
    main()
