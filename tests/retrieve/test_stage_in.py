"""lcflow stage: a tile-year's scene files fetched from a loopback server onto this file system, resumed
after a kill, verified, retried, within a disk budget; the cube then reads local files alone."""

import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pystac
import pytest
import rasterio

from lcflow.cli import main
from lcflow.common.progress import amount
from lcflow.retrieve import cube, download, search, stac_sources, stage_in, staged_file
from lcflow.retrieve.cube_settings import CubeSettings
from lcflow.retrieve.stage_ledger import Ledger
from lcflow.retrieve.stage_settings import StageSettings

from ..conftest import BANDS, SMALL_AOI, tmpfs
from ..http_server import serve

LCFLOW = str(Path(sys.executable).parent / "lcflow")
#: retries and timeouts short enough for a test, long enough for a loopback server
FAST = ["--http-timeout", "1", "--http-retries", "2", "--http-retry-delay", "0.1"]


def _raster(path: Path, side: int, seed: int = 0) -> Path:
    """An uncompressed tiled GeoTIFF of ``side`` x ``side`` uint16 noise (2 bytes a pixel)."""
    data = np.random.default_rng(seed).integers(0, 10000, (side, side), dtype=np.uint16)
    with rasterio.open(path, "w", driver="GTiff", width=side, height=side, count=1, dtype="uint16", tiled=True,
                       blockxsize=256, blockysize=256, crs="EPSG:32631",
                       transform=rasterio.Affine(10, 0, 600000, 0, -10, 5800000), nodata=0) as dst:
        dst.write(data, 1)
        dst.scales = (0.0001,)
        dst.update_tags(BAND="B02")
    return path


def _one_item(demo: Path, tmp: Path, url: str, names: dict[str, str], sizes: dict[str, int] | None = None,
              checksums: dict[str, str] | None = None) -> Path:
    """A manifest of one demo item of 31UFT 2018 whose ``blue`` and ``scl`` assets are ``url/name`` (with
    ``file:size`` / ``file:checksum`` where given); its path (the cube of band B02 reads those two)."""
    items = list(search.select(stac_sources.from_catalog(demo / "catalog" / "catalog.json"), "31UFT", 2018))
    item = items[0]
    item.assets = {key: pystac.Asset(f"{url}/{name}", media_type="image/tiff") for key, name in names.items()}
    for key, asset in item.assets.items():
        if sizes and key in sizes:
            asset.extra_fields["file:size"] = sizes[key]
        if checksums and key in checksums:
            asset.extra_fields["file:checksum"] = checksums[key]
    path = tmp / "items.json"
    path.write_text(json.dumps(pystac.ItemCollection([item]).to_dict(transform_hrefs=False)))
    return path


def _stage(manifest: Path, folder: Path, out: Path, *more: str) -> list[str]:
    return ["stage", "--items", str(manifest), "--tile", "31UFT", "--year", "2018", "--bands", "B02", "--dir",
            str(folder), "--out", str(out), *FAST, *more]


def _errors(capsys) -> list[str]:
    """What a command wrote to stderr but the log's own lines (which begin with their date)."""
    return [line for line in capsys.readouterr().err.strip().splitlines() if line and not line[:4].isdigit()]


def test_a_size_no_server_answers_is_refused_naming_the_asset(demo, tmp_path, capsys):
    """Where no STAC file:size is given, the disk budget asks each server (HEAD); a host that cannot be
    reached (a compute node without network: connection refused here) ends in one line naming the asset."""
    import socket

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    manifest = _one_item(demo, tmp_path, f"http://127.0.0.1:{port}", {"blue": "B02.tif", "scl": "SCL.tif"})
    code = main(_stage(manifest, tmp_path / "scenes", tmp_path / "staged.json", "--dry-run"))
    lines = _errors(capsys)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("lcflow stage: error: tile 31UFT 2018: item ") and " asset " in lines[0], lines
    assert "its size cannot be asked for: no connection to the server (Connection refused)" in lines[0], lines
    assert lines[0].endswith("docs/slurm.md)"), lines
    assert not (tmp_path / "scenes").exists() and not (tmp_path / "staged.json").exists()


def test_a_served_catalogue_is_staged_and_its_cube_is_made_with_the_server_gone(demo, stages, tmp_path):
    with serve(demo) as server:
        items = tmp_path / "items.json"
        search.run("31UFT", 2018, items, catalog=f"{server.url}/catalog/catalog.json")
        staged = tmp_path / "staged.json"
        n = stage_in.run(items, "31UFT", 2018, BANDS, staged, StageSettings(dir=str(tmp_path / "scenes"), connections=3))
        fetched = sum(v for k, v in server.statuses.items() if k == 200)
    manifest = search.read_manifest(staged)
    assert n == len(manifest) * (len(BANDS) + 1)  # the bands and SCL of every item, nothing else
    for item in manifest:
        assert len(item.assets) == len(BANDS) + 1, sorted(item.assets)
        for asset in item.assets.values():
            path = Path(asset.href)
            assert path.is_relative_to(tmp_path / "scenes" / "31UFT" / "2018") and path.is_file(), asset.href
            assert asset.extra_fields[stage_in.STAGED] is True
    assert fetched >= n
    assert not list((tmp_path / "scenes").rglob(f"*{download.PART_SUFFIX}"))
    # the server is gone: the cube reads the local copies, the same pixels as from the local catalogue
    cube.run(staged, "31UFT", 2018, tmp_path / "cube.tif", tmp_path / "valid.tif",
             CubeSettings(bands=BANDS, block_px=64), bounds=SMALL_AOI["31UFT"])
    with rasterio.open(tmp_path / "cube.tif") as a, rasterio.open(stages["cube2018"]) as b:
        np.testing.assert_array_equal(a.read(), b.read())
    # and a rerun, the server still gone, fetches nothing and writes the same manifest
    again = tmp_path / "again.json"
    assert stage_in.run(items, "31UFT", 2018, BANDS, again, StageSettings(dir=str(tmp_path / "scenes"))) == n
    assert json.loads(again.read_text()) == json.loads(staged.read_text())


def test_items_a_stac_api_finds_are_staged_as_the_same_bytes_its_server_sends(demo, tmp_path):
    """As against Earth Search: the items come from an API search, their files from another server; once
    staged, neither server is needed (the same cube as above comes from them)."""
    from ..stac_api import serve_api

    with serve(demo) as files, serve_api(demo / "catalog" / "catalog.json", assets=(demo, files.url)) as api:
        items = tmp_path / "items.json"
        search.run("31UFT", 2018, items, api=f"{api.url}/", max_cloud_cover=100)
        hrefs = {(i.id, k): a.href for i in search.read_manifest(items) for k, a in i.assets.items()}
        assert hrefs and all(h.startswith(f"{files.url}/") for h in hrefs.values()), list(hrefs.values())[:3]
        staged = tmp_path / "staged.json"
        n = stage_in.run(items, "31UFT", 2018, BANDS, staged, StageSettings(dir=str(tmp_path / "scenes"), connections=2))
    manifest = search.read_manifest(staged)
    assert n == len(manifest) * (len(BANDS) + 1)
    for item in manifest:
        for key, asset in item.assets.items():
            served = demo / hrefs[item.id, key].removeprefix(f"{files.url}/")
            assert Path(asset.href).is_relative_to(tmp_path / "scenes"), asset.href
            assert Path(asset.href).read_bytes() == served.read_bytes(), asset.href
    cube.run(staged, "31UFT", 2018, tmp_path / "cube.tif", tmp_path / "valid.tif",
             CubeSettings(bands=BANDS, block_px=64), bounds=SMALL_AOI["31UFT"])
    assert (tmp_path / "cube.tif").is_file()


def test_a_killed_stage_in_fetches_only_the_missing_bytes_when_run_again(demo, tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    files = {"blue": _raster(served / "a.tif", 2048, 1), "scl": _raster(served / "b.tif", 2048, 2)}
    total = sum(p.stat().st_size for p in files.values())
    with serve(served) as server:
        server.rate = 4e6  # bytes a second a connection: a kill finds both files half fetched
        manifest = _one_item(demo, tmp_path, server.url, {k: p.name for k, p in files.items()})
        args = _stage(manifest, tmp_path / "scenes", tmp_path / "staged.json", "--connections", "2")
        first = subprocess.Popen([LCFLOW, *args], stderr=subprocess.PIPE, text=True)
        parts: list[Path] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            parts = list((tmp_path / "scenes").rglob(f"*{download.PART_SUFFIX}"))
            if len(parts) == 2 and all(p.stat().st_size > total / 6 for p in parts):
                break
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        have = sum(p.stat().st_size for p in parts)
        assert len(parts) == 2 and 0 < have < total, (parts, have, total)
        time.sleep(0.5)  # the server notices the closed connections
        before = server.sent
        done = subprocess.run([LCFLOW, *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        sent = server.sent - before
    # the missing bytes, and at most one block more per partial file
    assert total - have <= sent <= total - have + 2 * download.CHUNK, (sent, total, have)
    for key, path in files.items():
        staged = next((tmp_path / "scenes").rglob(f"{key}.tif"))
        assert staged.read_bytes() == path.read_bytes()


@pytest.mark.parametrize("fault", ["truncate", "stall", "429"])
def test_a_transfer_broken_off_stalled_or_told_to_wait_is_resumed(fault, demo, tmp_path, capsys):
    served = tmp_path / "served"
    served.mkdir()
    source = _raster(served / "a.tif", 1024)
    _raster(served / "b.tif", 256)
    with serve(served) as server:
        server.faults["/a.tif"] = [fault]
        server.stall_s, server.retry_after_s = 5.0, 2
        manifest = _one_item(demo, tmp_path, server.url, {"blue": "a.tif", "scl": "b.tif"})
        began = time.monotonic()
        code = main(_stage(manifest, tmp_path / "scenes", tmp_path / "staged.json"))
        took = time.monotonic() - began
        sent, statuses = server.sent, dict(server.statuses)
    assert code == 0, _errors(capsys)
    assert next((tmp_path / "scenes").rglob("blue.tif")).read_bytes() == source.read_bytes()
    size = source.stat().st_size + (served / "b.tif").stat().st_size
    if fault == "429":
        assert took >= 2 and sent == size, (took, sent)  # its Retry-After waited for, nothing fetched twice
    else:
        # resumed where it broke off, the last OVERLAP bytes received asked for again and compared
        assert statuses.get(206) == 1 and sent == size + download.OVERLAP, (statuses, sent, size)


@pytest.mark.parametrize("case", ["html", "wrong size", "checksum", "404", "wait an hour"])
def test_a_bad_transfer_ends_in_one_line_naming_the_asset_and_a_rerun_finishes(case, demo, tmp_path, capsys):
    served = tmp_path / "served"
    served.mkdir()
    right = _raster(served / "a.tif", 512)
    _raster(served / "b.tif", 256)
    digest = hashlib.sha256(right.read_bytes()).hexdigest()
    sizes = {"blue": right.stat().st_size + 10} if case == "wrong size" else None
    checksums = {"blue": "1220" + ("0" * 64 if case == "checksum" else digest)}
    name = "missing.tif" if case == "404" else "a.tif"
    folder, out = tmp_path / "scenes", tmp_path / "staged.json"
    with serve(served) as server:
        if case == "html":
            server.faults["/a.tif"] = ["html"] * 3
        if case == "wait an hour":  # refused at once, not slept through
            server.faults["/a.tif"], server.retry_after_s = ["429"], 3600
        bad = _one_item(demo, tmp_path, server.url, {"blue": name, "scl": "b.tif"}, sizes, checksums)
        code = main(_stage(bad, folder, out))
        lines = _errors(capsys)
        assert code == 2 and len(lines) == 1, lines
        assert lines[0].startswith("lcflow stage: error: tile 31UFT 2018: item ") and " asset blue (" in lines[0]
        assert {"html": "an HTML page (status 200)", "wrong size": "(file:size)", "checksum": "file:checksum",
                "404": "404", "wait an hour": "asks to be asked again in 1h00m00s (Retry-After)"}[case] in lines[0], lines
        assert not out.exists() and not list(folder.rglob("blue.tif"))  # nothing corrupt for a cube to read
        good = _one_item(demo, tmp_path, server.url, {"blue": "a.tif", "scl": "b.tif"}, None,
                         {"blue": "1220" + digest})
        assert main(_stage(good, folder, out)) == 0, _errors(capsys)
    assert next(folder.rglob("blue.tif")).read_bytes() == right.read_bytes()
    assert not list(folder.rglob(f"*{download.PART_SUFFIX}"))


def test_a_file_system_too_small_is_refused_before_any_download(demo, tmp_path, capsys):
    with tmpfs(tmp_path / "small", "4m") as small:
        served = tmp_path / "served"
        served.mkdir()
        _raster(served / "a.tif", 1024)
        _raster(served / "b.tif", 1024)
        with serve(served) as server:
            manifest = _one_item(demo, tmp_path, server.url, {"blue": "a.tif", "scl": "b.tif"})
            code = main(_stage(manifest, small / "scenes", tmp_path / "staged.json"))
            sent = server.sent
        lines = _errors(capsys)
        assert code == 2 and len(lines) == 1, lines
        assert "staging needs 4.2 MB more (and 1.07 GB to spare) in " \
            f"{small}/scenes, whose file system has 4.2 MB free" in lines[0], lines
        assert sent == 0 and not list(small.iterdir())


def test_a_retried_request_is_logged_without_its_query(demo, tmp_path, caplog):
    """urllib3 logs its retries with the request's path and query: a signature must not reach the log."""
    served = tmp_path / "served"
    served.mkdir()
    _raster(served / "a.tif", 256)
    with serve(served, fail_first=1) as server:
        manifest = _one_item(demo, tmp_path, server.url, {"blue": "a.tif?sig=SECRET", "scl": "a.tif?sig=SECRET"})
        with caplog.at_level("DEBUG"):
            assert main(_stage(manifest, tmp_path / "scenes", tmp_path / "staged.json")) == 0
        assert server.statuses[503] == 1
    assert "Retry" in caplog.text and "/a.tif" in caplog.text and "SECRET" not in caplog.text


def test_a_second_stage_in_of_the_same_tile_year_is_refused_while_one_runs(demo, tmp_path):
    from lcflow.common.atomic import writer_lock

    served = tmp_path / "served"
    served.mkdir()
    _raster(served / "a.tif", 256)
    with serve(served) as server, writer_lock(tmp_path / "scenes" / "31UFT" / "2018"):  # as a running stage-in
        manifest = _one_item(demo, tmp_path, server.url, {"blue": "a.tif", "scl": "a.tif"})
        done = subprocess.run([LCFLOW, *_stage(manifest, tmp_path / "scenes", tmp_path / "staged.json")],
                              capture_output=True, text=True, timeout=120)
        sent = server.sent
    lines = [line for line in done.stderr.splitlines() if line and not line[:4].isdigit()]
    assert done.returncode == 2 and len(lines) == 1, lines
    assert f"another process is writing {tmp_path}/scenes/31UFT/2018" in lines[0] and sent == 0, lines


def test_a_dry_run_says_what_it_would_store_and_fetches_nothing(demo, tmp_path, caplog):
    served = tmp_path / "served"
    served.mkdir()
    sizes = [_raster(served / "a.tif", 512).stat().st_size, _raster(served / "b.tif", 256).stat().st_size]
    with serve(served) as server:
        manifest = _one_item(demo, tmp_path, server.url, {"blue": "a.tif", "scl": "b.tif"})
        with caplog.at_level("INFO", logger="lcflow"):
            assert main(_stage(manifest, tmp_path / "scenes", tmp_path / "staged.json", "--dry-run")) == 0
        sent, heads = server.sent, sum(server.requests.values())
    assert sent == 0 and heads == 2 and not (tmp_path / "scenes").exists() and not (tmp_path / "staged.json").exists()
    assert f"dry run: 2 files, {amount(sum(sizes))} in {tmp_path}/scenes/31UFT/2018; nothing fetched" in caplog.text


@pytest.mark.parametrize("href", ["s3://bucket/a.tif", "missing.tif"])
def test_an_asset_that_cannot_be_copied_is_named_in_one_line(href, demo, tmp_path, capsys):
    """Copying local assets (stage.mode fetch): an S3 asset is refused as in auto mode, a missing file named."""
    _raster(tmp_path / "b.tif", 256)
    manifest = _one_item(demo, tmp_path, str(tmp_path), {"blue": "b.tif", "scl": "b.tif"})
    data = json.loads(manifest.read_text())
    data["features"][0]["assets"]["blue"]["href"] = href if "://" in href else str(tmp_path / href)
    manifest.write_text(json.dumps(data))
    code = main(_stage(manifest, tmp_path / "scenes", tmp_path / "staged.json", "--mode", "fetch"))
    lines = _errors(capsys)
    assert code == 2 and len(lines) == 1 and " asset blue" in lines[0], lines
    assert ("is on S3" if "://" in href else f"{tmp_path / href} is not a file") in lines[0], lines


def test_remove_staged_removes_what_the_ledger_says_stage_wrote_and_nothing_else(tmp_path):
    """Only files the stage-in's ledger records, unchanged since, are removed: not a user's file in the staged
    layout whose asset says lcflow:staged (a catalogue's fields are copied as they are), not a file replaced
    since it was staged, not a local asset read in place."""
    folder = tmp_path / "scenes"
    year = folder / "31UFT" / "2018"
    staged, users, replaced = (year / "S2_X" / f"{k}.tif" for k in ("blue", "green", "red"))
    staged.parent.mkdir(parents=True)
    for path in (staged, users, replaced):
        path.with_name("tmp").write_bytes(b"x")
        if path is not users:
            Ledger(year).record(path.with_name("tmp"), path)
        path.with_name("tmp").rename(path)
    replaced.unlink()
    replaced.write_bytes(b"x")  # the user's own file now, of the same size, where a staged one was
    elsewhere = tmp_path / "mine.tif"
    elsewhere.write_bytes(b"y")
    inside = folder / "own" / "nir.tif"  # a user's scene read in place, in the same folder: never removed
    inside.parent.mkdir()
    inside.write_bytes(b"z")
    item = pystac.Item("S2_X", None, None, pystac.utils.str_to_datetime("2018-05-01T10:00:00Z"), {})
    marked = {stage_in.STAGED: True}
    item.assets = {"blue": pystac.Asset(str(staged), extra_fields=marked),
                   "green": pystac.Asset(str(users), extra_fields=marked),
                   "red": pystac.Asset(str(replaced), extra_fields=marked),
                   "scl": pystac.Asset(str(elsewhere), extra_fields=marked),
                   "nir": pystac.Asset(str(inside), extra_fields=marked)}
    manifest = tmp_path / "staged.json"
    manifest.write_text(json.dumps(pystac.ItemCollection([item]).to_dict(transform_hrefs=False)))
    assert stage_in.remove_staged(manifest, folder) == 1
    assert not staged.exists() and all(p.exists() for p in (users, replaced, elsewhere, inside))
    assert (year / ".lcflow-staged.jsonl").read_text().count("red.tif") == 1  # its entry kept, not matched
    assert stage_in.remove_staged(manifest, folder) == 0


def test_multihashes_and_file_names():
    assert staged_file.parse_multihash("1220" + "ab" * 32) == (hashlib.sha256, bytes.fromhex("ab" * 32))
    assert staged_file.parse_multihash("d50110" + "cd" * 16)[1] == bytes.fromhex("cd" * 16)  # md5: two-byte code
    assert staged_file.parse_multihash("1b020000") is None  # keccak-256: a function this module does not know
    with pytest.raises(ValueError, match="digest has 2 bytes, 32 said"):
        staged_file.parse_multihash("1220abcd")
    for cut in ("12", "", "d5"):  # cut inside its header
        with pytest.raises(ValueError, match="ends inside its header"):
            staged_file.parse_multihash(cut)
    assert stage_in.safe_name("S2A_31UFT_20180105_0_L2A") == "S2A_31UFT_20180105_0_L2A"
    assert stage_in.safe_name("../../etc/passwd").startswith("_.._etc_passwd-") and stage_in.safe_name("..") != ".."
    assert stage_in.safe_name("a:b") != stage_in.safe_name("a_b") == "a_b"  # two ids, two folders
    long = stage_in.safe_name("x" * 300)
    assert len(long) <= 100 and long != stage_in.safe_name("x" * 299)
    assert stage_in.suffix("https://x/a/B02.jp2?sig=1") == ".jp2" and stage_in.suffix("https://x/a/B02") == ".tif"
    assert os.sep not in stage_in.safe_name("a/b") and not stage_in.safe_name(".hidden").startswith(".")


def test_an_area_smaller_than_the_tile_fetches_only_the_internal_tiles_over_it(demo, tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    files = {"blue": _raster(served / "a.tif", 2048, 1), "scl": _raster(served / "b.tif", 2048, 2)}
    whole = sum(p.stat().st_size for p in files.values())
    bounds = (600000 + 5000, 5800000 - 8000, 600000 + 8000, 5800000 - 5000)  # 300 x 300 px inside the 2048
    with serve(served) as server:
        manifest = _one_item(demo, tmp_path, server.url, {k: p.name for k, p in files.items()})
        data = json.loads(manifest.read_text())
        for asset in data["features"][0]["assets"].values():
            asset["proj:shape"], asset["proj:transform"] = [2048, 2048], [10, 0, 600000, 0, -10, 5800000]
        manifest.write_text(json.dumps(data))
        out = tmp_path / "staged.json"
        stage_in.run(manifest, "31UFT", 2018, ["B02"], out, StageSettings(dir=str(tmp_path / "scenes")), bounds=bounds)
        sent = server.sent
    assert sent < whole / 4, (sent, whole)  # the 3 x 3 of 256 px tiles over the area, not the files
    (item,) = json.loads(out.read_text())["features"]
    for key, source in files.items():
        asset = item["assets"][key]
        assert asset["proj:shape"] == [768, 768] and asset["proj:transform"][2:6:3] == [600000 + 256 * 10 * 1,
                                                                                     5800000 - 256 * 10 * 1], asset
        with rasterio.open(asset["href"]) as copy, rasterio.open(source) as src:
            np.testing.assert_array_equal(copy.read(1), src.read(1, window=((256, 1024), (256, 1024))))
            assert (copy.crs, copy.nodata, copy.scales, copy.tags()) == (src.crs, src.nodata, src.scales, src.tags())


def test_the_stage_in_s_progress_counts_the_bytes_of_this_run(demo, tmp_path, caplog):
    """A first stage-in: every byte fetched, its last line the files and bytes it planned; a rerun that
    fetches nothing says so, with no rate over bytes that never came."""
    caplog.set_level(logging.INFO, logger="lcflow")
    with serve(demo) as server:
        items = tmp_path / "items.json"
        search.run("31UFT", 2018, items, catalog=f"{server.url}/catalog/catalog.json")
        settings = StageSettings(dir=str(tmp_path / "scenes"), connections=2)
        n = stage_in.run(items, "31UFT", 2018, BANDS, tmp_path / "staged.json", settings)
        first = [r.getMessage() for r in caplog.records]
        caplog.clear()
        stage_in.run(items, "31UFT", 2018, BANDS, tmp_path / "again.json", settings)
        again = [r.getMessage() for r in caplog.records]
    total = sum(p.stat().st_size for p in (tmp_path / "scenes").rglob("*.tif"))
    (planned,) = [m for m in first if "of them to fetch" in m]
    assert f"{n} files, {amount(total)}, {amount(total)} of them to fetch" in planned
    progress = [m for m in first if re.search(r": \d+/\d+ files, ", m)]
    assert progress and f"{n}/{n} files, {amount(total)} of {amount(total)}, " in progress[-1], progress
    assert f"({amount(total)} received this run)" in first[-1]
    (planned,) = [m for m in again if "of them to fetch" in m]
    assert f"{n} files, {amount(total)}, 0 B of them to fetch" in planned, planned
    assert not [m for m in again if "/s, " in m], again
    assert "nothing received this run" in again[-1] or "(0 B received this run)" in again[-1], again[-1]
