from pathlib import Path

import numpy as np
import pytest
import rasterio
from affine import Affine
from rasterio.transform import from_origin

from lcflow.errors import LcflowError
from lcflow.retrieve import asset_reader
from lcflow.retrieve.asset_reader import AssetReader, AssetReadError

GRID = from_origin(600000, 5800000, 20, 20)


@pytest.fixture
def files(tmp_path):
    """Three 20 m bands of 100 x 80 px, tiled as Sentinel-2's COGs are (smaller tiles)."""
    paths = []
    for i in range(3):
        path = tmp_path / f"b{i}.tif"
        data = (np.arange(100 * 80).reshape(100, 80) + 1000 * i + 1).astype(np.uint16)
        with rasterio.open(path, "w", driver="GTiff", width=80, height=100, count=1, dtype="uint16", crs="EPSG:32631",
                           transform=GRID, nodata=0, tiled=True, blockxsize=32, blockysize=32) as dst:
            dst.write(data, 1)
        paths.append(str(path))
    return paths


def region(row: int, col: int) -> Affine:
    return GRID * Affine.translation(col, row)


def test_windows_inside_across_and_beyond_the_file(files):
    with rasterio.open(files[1]) as src:
        whole = src.read(1)
    with AssetReader() as reader:
        inside = reader.read(files[1], region(10, 20), (30, 40))
        assert inside.dtype == np.uint16 and np.array_equal(inside, whole[10:40, 20:60])
        across = reader.read(files[1], region(-2, 70), (5, 15))  # over the top and right edges
        expected = np.zeros((5, 15), np.uint16)
        expected[2:, :10] = whole[:3, 70:]
        assert np.array_equal(across, expected)
        assert not reader.read(files[1], region(200, 200), (4, 4)).any()  # outside: no data


def test_a_window_off_the_files_grid_is_refused_naming_the_file(files):
    with AssetReader() as reader:
        with pytest.raises(LcflowError, match=r"b0\.tif: its pixel grid .* is not the grid"):
            reader.read(files[0], GRID * Affine.translation(0.5, 0), (4, 4))  # half a pixel off
        with pytest.raises(LcflowError, match=r"b0\.tif"):
            reader.read(files[0], from_origin(600000, 5800000, 10, 10), (4, 4))  # another pixel size


def test_files_stay_open_and_the_least_recently_read_is_closed_first(files, monkeypatch):
    opened = []
    real_open = rasterio.open
    monkeypatch.setattr(rasterio, "open", lambda path: opened.append(real_open(path)) or opened[-1])
    with AssetReader(max_open=2) as reader:
        for _ in range(3):
            reader.read(files[0], region(0, 0), (8, 8))
            reader.read(files[1], region(0, 0), (8, 8))
        assert len(opened) == 2  # each file opened once for six reads
        reader.read(files[2], region(0, 0), (8, 8))  # a third file: the least recently read one closes
        assert [d.closed for d in opened] == [True, False, False]
    assert all(d.closed for d in opened)


def test_signed_urls_are_signed_again_when_old(files, monkeypatch):
    signed = []

    def sign(href: str) -> str:
        signed.append(href)
        return href

    with AssetReader(sign, max_age_s=3600) as reader:
        for _ in range(3):
            reader.read(files[0], region(0, 0), (8, 8))
    assert signed == [files[0]]  # signed once while the signature is young
    signed.clear()
    with AssetReader(sign, max_age_s=0) as reader:
        for _ in range(3):
            reader.read(files[0], region(0, 0), (8, 8))
    assert signed == [files[0]] * 3  # and at every read once it may have expired


def test_a_file_that_cannot_be_read_gives_gdals_reason(files, tmp_path):
    """GDAL's own words, not rasterio's 'Read failed. See previous exception'."""
    whole = open(files[0], "rb").read()
    broken = tmp_path / "broken.tif"
    broken.write_bytes(whole[:len(whole) - 4000])  # the header and the first tiles, the last ones cut off
    with AssetReader() as reader:
        with pytest.raises(AssetReadError, match="missing.tif: No such file or directory"):
            reader.read(str(tmp_path / "missing.tif"), region(0, 0), (4, 4))
        assert reader.read(str(broken), region(0, 0), (8, 8)).any()  # the first tile is there
        with pytest.raises(AssetReadError, match=r"TIFFReadEncodedTile.*Read error|TIFFFillTile:Read error"):
            reader.read(str(broken), region(0, 0), (100, 80))


@pytest.mark.parametrize("soft, hard, allowed, soft_after", [
    (300, 4096, 4096 - 256, 4096),  # the soft limit is raised to the hard one, less 256 for the rest
    (300, 300, 300 - 256, 300),  # no room to raise it: what there is, less the margin
    (100, 100, 16, 100),  # a tiny limit: still 16 files (the reader closes the least recent ones)
])
def test_the_reader_raises_the_open_files_limit_where_it_may(soft, hard, allowed, soft_after):
    """open_files_allowed in a process started with the limits given (lowering them needs no privilege)."""
    import resource
    import subprocess
    import sys

    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] < hard:
        pytest.fail(f"this test needs a hard limit on open files of at least {hard}")
    code = ("import resource; from lcflow.retrieve import asset_reader; "
            "print(asset_reader.open_files_allowed(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))).stdout
    assert out.split() == [str(allowed), str(soft_after)]


def test_reading_into_an_array_of_the_files_type(files):
    with AssetReader() as reader:
        out = np.full((5, 15), 7, np.uint16)
        assert reader.read(files[2], region(-2, 70), (5, 15), out=out) is out
        assert np.array_equal(out, reader.read(files[2], region(-2, 70), (5, 15)))
        assert not out[:2].any()  # beyond the file: no data, not what the array held
        with pytest.raises(LcflowError, match=r"b2\.tif: stores uint16 pixels, float32 expected"):
            reader.read(files[2], region(0, 0), (5, 15), out=np.zeros((5, 15), np.float32))
        with pytest.raises(ValueError, match=r"a window of \(5, 15\) px read into an array of \(4, 15\)"):
            reader.read(files[2], region(0, 0), (5, 15), out=np.zeros((4, 15), np.uint16))


def test_block_bytes_is_one_decoded_tile_of_the_file(files, tmp_path):
    striped = tmp_path / "striped.tif"
    with rasterio.open(striped, "w", driver="GTiff", width=50, height=40, count=1, dtype="uint8", crs="EPSG:32631",
                       transform=GRID) as dst:
        dst.write(np.ones((1, 40, 50), np.uint8))
    with AssetReader() as reader:
        assert reader.block_bytes(files[0]) == 32 * 32 * 2  # 32 px tiles of uint16
        rows, cols = rasterio.open(striped).block_shapes[0]
        assert reader.block_bytes(str(striped)) == rows * cols == rows * 50  # strips of bytes
        with pytest.raises(AssetReadError, match="missing.tif: No such file or directory"):
            reader.block_bytes(str(tmp_path / "missing.tif"))


def test_a_failing_server_is_named_without_the_signature(files):
    """GDAL's messages quote the URL it read, signature and all: the error keeps the status, not the query."""
    from lcflow.retrieve import remote

    from ..http_server import serve

    folder = str(files[0]).rsplit("/", 1)[0]
    with serve(Path(folder)) as server, rasterio.Env(**remote.Network(retries=0).gdal_options()):
        url = f"{server.url}/b0.tif"
        with AssetReader(sign=lambda href: href + "?sig=SECRET") as reader:
            assert reader.read(url, region(0, 0), (4, 4)).any()  # signed, served
            server.down_after = 0
            with pytest.raises(AssetReadError) as failed:
                reader.read(f"{server.url}/b1.tif", region(0, 0), (4, 4))
        assert "503" in str(failed.value) and "SECRET" not in str(failed.value) and "sig=" not in str(failed.value)


def test_the_server_is_asked_where_gdal_does_not_say(files):
    from ..http_server import serve

    folder = str(files[0]).rsplit("/", 1)[0]
    with serve(Path(folder)) as server:
        assert asset_reader._probe(f"{server.url}/b0.tif") is None  # it answers
        server.down_after = 0
        assert asset_reader._probe(f"{server.url}/b0.tif") == "the server answers HTTP 503 busy, try again"
        port = server.url.rsplit(":", 1)[1]
    assert asset_reader._probe(f"http://127.0.0.1:{port}/b0.tif", timeout_s=2).startswith("the server cannot be reached")
