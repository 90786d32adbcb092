"""The stage-in against what it must never do: adopt, mark or remove a user's files, publish bytes that are not
the server's file, carry a secret header to another host; and the one line each odd answer or field gets."""

import hashlib
import json
import os
import signal
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import rasterio

from lcflow.cli import main
from lcflow.retrieve import download, remote, stage_in

from ..conftest import tmpfs
from ..http_server import serve
from .test_stage_in import LCFLOW, _errors, _one_item, _raster, _stage


def _sha(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _served(tmp_path: Path, side: int = 1024) -> tuple[Path, Path, Path]:
    served = tmp_path / "served"
    served.mkdir()
    return served, _raster(served / "a.tif", side, 1), _raster(served / "b.tif", 256, 2)


def test_a_folder_of_the_users_own_scenes_laid_out_alike_is_refused_and_left_as_it_was(demo, tmp_path, capsys):
    served, a, b = _served(tmp_path, 256)
    folder = tmp_path / "scenes"
    with serve(served) as server:
        manifest = _one_item(demo, tmp_path, server.url, {"blue": "a.tif", "scl": "b.tif"})
        item_id = json.loads(manifest.read_text())["features"][0]["id"]
        own = folder / "31UFT" / "2018" / item_id
        own.mkdir(parents=True)
        (own / "blue.tif").write_bytes(b.read_bytes())  # the user's own files, where staged ones would be
        (own / "scl.tif").write_bytes(a.read_bytes())
        before = _sha(folder)
        code = main(_stage(manifest, folder, tmp_path / "staged.json"))
        lines = _errors(capsys)
        sent = server.sent
    assert code == 2 and len(lines) == 1, lines
    assert f"{own}/blue.tif and 1 more is there already, and lcflow stage did not write it" in lines[0], lines
    assert sent == 0 and _sha(folder) == before and not (tmp_path / "staged.json").exists()


def test_a_stage_dir_around_the_catalogue_is_refused_and_unstage_removes_no_file_of_it(demo, tmp_path, capsys):
    """A local catalogue whose assets say lcflow:staged (search copies fields as they are), stage.dir around it:
    the stage-in refuses in one line, and ``cube --unstage`` over that manifest removes nothing."""
    catalogue = tmp_path / "data"
    (catalogue / "scenes").mkdir(parents=True)
    a, b = _raster(catalogue / "scenes" / "a.tif", 256, 1), _raster(catalogue / "scenes" / "b.tif", 256, 2)
    manifest = _one_item(demo, tmp_path, str(catalogue / "scenes"), {"blue": a.name, "scl": b.name})
    data = json.loads(manifest.read_text())
    for asset in data["features"][0]["assets"].values():
        asset[stage_in.STAGED] = True
    manifest.write_text(json.dumps(data))
    before = _sha(catalogue)
    for mode in ("auto", "fetch"):
        code = main(_stage(manifest, catalogue, tmp_path / "staged.json", "--mode", mode))
        lines = _errors(capsys)
        assert code == 2 and len(lines) == 1, lines
        assert f"stage.dir {catalogue} holds the catalogue's own files (item " in lines[0], lines
    assert stage_in.remove_staged(manifest, catalogue) == 0
    assert _sha(catalogue) == before


def test_a_resume_answered_with_other_bytes_under_the_right_header_starts_the_file_over(demo, tmp_path):
    served, a, b = _served(tmp_path)
    other = served / "a.tif.other"
    _raster(other, 1024, 9)  # same layout, other pixels: the same size
    assert other.stat().st_size == a.stat().st_size
    with serve(served) as server:
        server.faults["/a.tif"] = ["truncate", "other"]
        manifest = _one_item(demo, tmp_path, server.url, {"blue": "a.tif", "scl": "b.tif"})  # no file:checksum
        assert main(_stage(manifest, tmp_path / "scenes", tmp_path / "staged.json")) == 0
        statuses = dict(server.statuses)
    assert statuses["other"] == 1 and statuses[206] == 1, statuses
    assert next((tmp_path / "scenes").rglob("blue.tif")).read_bytes() == a.read_bytes()


@pytest.mark.parametrize("validators", [True, False])
def test_a_file_changed_on_the_server_between_runs_is_fetched_whole_again(validators, demo, tmp_path, capsys):
    """The resume sends If-Range with the first answer's ETag: a changed file comes whole (200); a server that
    gives no ETag or Last-Modified has its file started over, never patched."""
    served, a, b = _served(tmp_path)
    folder = tmp_path / "scenes"
    with serve(served) as server:
        server.validators = validators
        server.faults["/a.tif"] = ["truncate"]
        manifest = _one_item(demo, tmp_path, server.url, {"blue": "a.tif", "scl": "b.tif"})
        assert main(_stage(manifest, folder, tmp_path / "staged.json", "--http-retries", "0")) == 2
        (part,) = folder.rglob(f"*{download.PART_SUFFIX}")
        have = part.stat().st_size
        assert 0 < have < a.stat().st_size
        _raster(served / "new.tif", 1024, 5)
        os.replace(served / "new.tif", a)  # version B, the same size
        before = server.sent
        assert main(_stage(manifest, folder, tmp_path / "staged.json")) == 0, _errors(capsys)
        sent = server.sent - before
        conditions = [h.get("If-Range") for h in server.headers_seen if h.get("Range")]
    assert next(folder.rglob("blue.tif")).read_bytes() == a.read_bytes()  # B, whole: no A-then-B file
    assert sent >= a.stat().st_size, (sent, have)
    assert (conditions and conditions[-1].startswith('"')) if validators else not conditions, conditions
    assert not list(folder.rglob(f"*{download.RESUME_SUFFIX}"))


def test_two_ids_one_name_apart_are_staged_apart_and_an_item_listed_twice_is_refused(demo, tmp_path, capsys):
    served, a, b = _served(tmp_path, 256)
    with serve(served) as server:
        manifest = _one_item(demo, tmp_path, server.url, {"blue": "a.tif", "scl": "b.tif"})
        data = json.loads(manifest.read_text())
        first = data["features"][0]
        second = json.loads(json.dumps(first))
        first["id"], second["id"] = "S2A:31UFT:20180118", "S2A_31UFT_20180118"
        second["assets"]["blue"]["href"] = f"{server.url}/b.tif"
        manifest.write_text(json.dumps(data | {"features": [first, second]}))
        out = tmp_path / "staged.json"
        assert main(_stage(manifest, tmp_path / "scenes", out)) == 0, _errors(capsys)
        staged = {f["id"]: f["assets"]["blue"]["href"] for f in json.loads(out.read_text())["features"]}
        assert Path(staged[first["id"]]).read_bytes() == a.read_bytes()
        assert Path(staged[second["id"]]).read_bytes() == b.read_bytes()
        manifest.write_text(json.dumps(data | {"features": [second, second]}))
        code = main(_stage(manifest, tmp_path / "scenes", out))
    lines = _errors(capsys)
    assert code == 2 and len(lines) == 1 and "would be staged to one file" in lines[0], lines


def test_a_secret_header_of_any_name_reaches_no_second_host(demo, tmp_path, monkeypatch):
    """X-Api-Key in GDAL_HTTP_HEADERS: an asset on another host is refused before any read, and a redirect to
    another host (localhost is not 127.0.0.1 to a client) is followed without the header."""
    served, a, b = _served(tmp_path, 256)
    monkeypatch.setenv("GDAL_HTTP_HEADERS", "X-Api-Key: SECRET\r\nUser-Agent: mine")
    assert remote.credentials_in_env() == "GDAL_HTTP_HEADERS"
    assert remote.credentials_in_env({"GDAL_HTTP_HEADERS": "User-Agent: mine"}) is None
    with serve(served) as first, serve(served) as second:
        with pytest.raises(Exception, match="would send the credentials to localhost:"):
            remote.check_credentials_reach([("item x asset blue", f"http://localhost:{second.server_address[1]}/a.tif")],
                                           f"{first.url}/catalog.json")
        first.redirects["/a.tif"] = f"http://localhost:{second.server_address[1]}/a.tif"
        first.redirects["/c.json"] = f"http://localhost:{second.server_address[1]}/c.json"
        (served / "c.json").write_text('{"a": 1}')
        fetcher = download.Fetcher(remote.Network(retries=0), 1)
        asset = download.Asset("item x asset blue", f"{first.url}/a.tif", tmp_path / "out" / "blue.tif")
        fetcher.fetch(asset)
        assert remote.catalogue_io(f"{first.url}/c.json").read_text_from_href(f"{first.url}/c.json") == '{"a": 1}'
        seen_first, seen_second = list(first.headers_seen), list(second.headers_seen)
    assert asset.dest.read_bytes() == a.read_bytes()
    assert seen_first and all(h.get("X-Api-Key") == "SECRET" for h in seen_first), seen_first
    assert len(seen_second) >= 2 and not any("X-Api-Key" in h for h in seen_second), seen_second


@pytest.mark.parametrize("case", ["gzip", "no HEAD", "no length", "NaN size", "huge header", "larger than its item",
                                  "dangling stage.dir"])
def test_an_odd_answer_or_field_gets_one_line_or_is_staged(case, demo, tmp_path, capsys):
    served, a, b = _served(tmp_path, 256)
    folder = tmp_path / "scenes"
    if case == "huge header":
        _claim_side(a, 1_000_000)
    if case == "dangling stage.dir":
        folder.symlink_to(tmp_path / "gone")
    with serve(served) as server:
        server.faults["/a.tif"] = ["gzip"] if case == "gzip" else []
        server.head = case != "no HEAD"
        server.lengths = case != "no length"
        manifest = _one_item(demo, tmp_path, server.url, {"blue": "a.tif", "scl": "b.tif"},
                             sizes={"blue": float("nan")} if case == "NaN size" else None)
        if case == "larger than its item":
            data = json.loads(manifest.read_text())
            data["features"][0]["assets"]["blue"]["proj:shape"] = [128, 128]
            manifest.write_text(json.dumps(data))
        code = main(_stage(manifest, folder, tmp_path / "staged.json", "--http-retries", "0"))
    lines = _errors(capsys)
    if case in ("no HEAD", "no length"):  # sizes from a one-byte GET's Content-Range; the file itself by GET
        assert code == 0, lines
        assert next(folder.rglob("blue.tif")).read_bytes() == a.read_bytes()
        return
    assert code == 2 and len(lines) == 1, lines
    assert {
        "gzip": "asset blue (http://127.0.0.1:{port}/a.tif): the server sent it gzip-encoded (Content-Encoding)",
        "NaN size": "asset blue: its file:size nan is not a number of bytes",
        "huge header": "its header says 1000000 x 1000000 px, more than any scene asset",
        "larger than its item": "its header says 256 x 256 px, its item 128 x 128 (proj:shape)",
        "dangling stage.dir": f"stage.dir {folder} is a link to {tmp_path / 'gone'}, which does not exist",
    }[case].format(port=server.server_address[1]) in lines[0], lines
    assert not list(folder.rglob("blue.tif")) if folder.exists() else True


def _claim_side(path: Path, side: int) -> None:
    """Rewrite a little-endian classic TIFF's ImageWidth and ImageLength to ``side`` (LONG values): a header
    that claims a raster its bytes are not."""
    data = bytearray(path.read_bytes())
    (ifd,) = struct.unpack_from("<I", data, 4)
    (count,) = struct.unpack_from("<H", data, ifd)
    for i in range(count):
        at = ifd + 2 + 12 * i
        tag, _ = struct.unpack_from("<HH", data, at)
        if tag in (256, 257):
            struct.pack_into("<HHII", data, at, tag, 4, 1, side)
    path.write_bytes(bytes(data))


def test_ctrl_c_ends_a_stage_in_within_seconds_keeping_its_partial_files(demo, tmp_path):
    served, a, b = _served(tmp_path, 2048)
    with serve(served) as server:
        server.rate = 1e6  # bytes a second: the transfers would take seconds more
        manifest = _one_item(demo, tmp_path, server.url, {"blue": "a.tif", "scl": "b.tif"})
        args = _stage(manifest, tmp_path / "scenes", tmp_path / "staged.json", "--http-timeout", "30")
        run = subprocess.Popen([LCFLOW, *args], stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(
                p.stat().st_size > 1e6 for p in (tmp_path / "scenes").rglob(f"*{download.PART_SUFFIX}")):
            time.sleep(0.05)
        run.send_signal(signal.SIGINT)
        began = time.monotonic()
        _, err = run.communicate(timeout=30)
        took = time.monotonic() - began
    (part,) = (tmp_path / "scenes").rglob(f"*{download.PART_SUFFIX}")
    assert run.returncode != 0 and took < 5, (took, err[-2000:])
    assert "interrupted; the partial files are kept" in err and part.stat().st_size < a.stat().st_size


def test_a_full_file_system_mid_transfer_ends_in_one_line_and_frees_its_partial_file(demo, tmp_path, capsys,
                                                                                     monkeypatch):
    """A server whose sizes lie (file:size says little) passes the disk budget; the full disk is said, naming
    the asset, and the partial file removed (a full shared file system stops every job on it)."""
    with tmpfs(tmp_path / "small", "1m") as small:
        monkeypatch.setattr(stage_in, "MARGIN_BYTES", 0)
        served, a, b = _served(tmp_path, 1024)  # 2 MB
        with serve(served) as server:
            manifest = _one_item(demo, tmp_path, server.url, {"blue": "a.tif", "scl": "b.tif"},
                                 sizes={"blue": 1000, "scl": 1000})
            code = main(_stage(manifest, small / "scenes", tmp_path / "staged.json", "--connections", "1"))
        lines = _errors(capsys)
        assert code == 2 and len(lines) == 1, lines
        assert "asset blue: the file system of " in lines[0] and "is full after" in lines[0], lines
        assert not list(small.rglob(f"*{download.PART_SUFFIX}"))


def test_a_staged_raster_is_decoded_whole_where_its_item_has_no_checksum(tmp_path):
    """A block whose bytes are another's (a patched body) passes the block table and the last block's decode;
    decoding every block refuses it."""
    from lcflow.retrieve import staged_file

    path = tmp_path / "a.tif"
    data = np.random.default_rng(0).integers(0, 10000, (512, 512), dtype=np.uint16)
    with rasterio.open(path, "w", driver="GTiff", width=512, height=512, count=1, dtype="uint16", tiled=True,
                       blockxsize=256, blockysize=256, compress="deflate", crs="EPSG:32631",
                       transform=rasterio.Affine(10, 0, 600000, 0, -10, 5800000)) as dst:
        dst.write(data, 1)
    with rasterio.open(path) as ds:
        offset = int(ds.get_tag_item("BLOCK_OFFSET_0_0", "TIFF", bidx=1))
    raw = bytearray(path.read_bytes())
    raw[offset: offset + 64] = os.urandom(64)  # the first block's deflate stream broken
    path.write_bytes(bytes(raw))
    staged_file.verify(path, "x", checksum="1220" + hashlib.sha256(bytes(raw)).hexdigest())  # a checksum vouches
    with pytest.raises(staged_file.NotTheFile, match="not a whole raster"):
        staged_file.verify(path, "x")
    with pytest.raises(Exception, match="file:checksum '1220ab' is no multihash"):
        staged_file.verify(path, "item x asset blue", checksum="1220ab")


class _Answer:
    """A urllib3 answer as the Fetcher reads it: status, headers and a body read in pieces."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes = b""):
        self.status, self.headers, self.reason, self._body = status, headers, "", body

    def read1(self, n: int) -> bytes:
        piece, self._body = self._body[:n], self._body[n:]
        return piece

    def read(self, n: int) -> bytes:
        return self.read1(n)


def test_a_body_shorter_or_longer_than_its_length_or_a_range_not_asked_for_is_no_file(tmp_path):
    fetcher = download.Fetcher(remote.Network(), 1)
    asset = download.Asset("item x asset blue", "http://127.0.0.1:9/a.tif", tmp_path / "blue.tif")
    with pytest.raises(download.Failed, match="the server sent 10 of 20 bytes") as short:
        fetcher._receive(_Answer(200, {}, b"x" * 10), asset, 0, 20, None)
    assert not short.value.restart  # resumed from the 10 received
    with pytest.raises(download.Failed, match="the server sent 30 bytes, more than its 20") as long:
        fetcher._receive(_Answer(200, {}, b"x" * 30), asset, 0, 20, None)
    assert long.value.restart
    assert fetcher._expected(_Answer(206, {"Content-Range": "bytes 100-199/200"}), asset, 100) == 200
    for wrong in ("bytes 0-199/200", "bytes 10-199/200", "bytes 100-199/*", ""):
        with pytest.raises(download.Failed, match="of a request for bytes 100-") as failed:
            fetcher._expected(_Answer(206, {"Content-Range": wrong}), asset, 100)
        assert failed.value.restart, wrong


def test_the_disk_budget_counts_files_staged_and_parts_received_once(tmp_path):
    whole = download.Asset("a", "http://127.0.0.1:9/a.tif", tmp_path / "a.tif", size=1000)
    half = download.Asset("b", "http://127.0.0.1:9/b.tif", tmp_path / "b.tif", size=1000)
    new = download.Asset("c", "http://127.0.0.1:9/c.tif", tmp_path / "c.tif", size=1000)
    whole.dest.write_bytes(b"x" * 1000)
    half.part.write_bytes(b"x" * 400)
    assert stage_in._present(whole) == 1000 and stage_in._present(half) == 400 and stage_in._present(new) == 0
    total = stage_in.budget([whole, half, new], lambda a: a.size, tmp_path, "stage x", 1)
    assert total == 3000
    # 600 bytes of b and 1000 of c to fetch, nothing of a
    assert _budget_with_free(tmp_path, [whole, half, new], free=stage_in.MARGIN_BYTES + 1600) == 3000
    with pytest.raises(Exception, match=r"staging needs 1.6 kB more"):
        _budget_with_free(tmp_path, [whole, half, new], free=stage_in.MARGIN_BYTES + 1599)


def _budget_with_free(folder: Path, assets, free: int):
    """The budget as a file system of ``free`` bytes free would judge it."""
    from unittest import mock

    with mock.patch.object(stage_in, "_free_bytes", return_value=free):
        return stage_in.budget(assets, lambda a: a.size, folder, "stage x", 1)
