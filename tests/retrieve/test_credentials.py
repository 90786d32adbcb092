"""Credentials never reach a file, a log or a command line; a remote catalogue cannot make lcflow read local
files; a static catalogue's items of another collection are left out, named."""

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lcflow.cli import main
from lcflow.errors import LcflowError
from lcflow.retrieve import remote, search, stac_sources
from lcflow.retrieve.cube_settings import CubeSettings

from ..conftest import ROOT, snakemake
from ..http_server import serve

SECRETS = ("hunter2", "SECRETTOKEN")


def _catalogue(demo: Path, tmp_path: Path, edit=None) -> Path:
    """The demo catalogue's JSON (scenes by absolute http hrefs set later) in a folder of the test's own."""
    root = tmp_path / "catalog"
    shutil.copytree(demo / "catalog", root)
    if edit:
        for item in root.rglob("S2*_L2A.json"):
            data = json.loads(item.read_text())
            edit(data, item.parent.relative_to(root))
            item.write_text(json.dumps(data))
    return root


def test_secrets_in_a_location_are_found_and_cut():
    url = "http://user:hunter2@host:8080/v1/catalog.json?token=SECRETTOKEN&page=2"
    assert remote.secrets_in(url) == ["a user name and password (user:password@)", "a secret in its query (token)"]
    assert remote.secrets_in("https://host/x.tif?se=2030&sig=abc&sp=r") == ["a secret in its query (se, sig, sp)"]
    assert remote.secrets_in("https://earth-search.aws.element84.com/v1") == []
    assert remote.clean_href(url) == "http://host:8080/v1/catalog.json?page=2"  # a page is no secret
    assert remote.clean_href("/data/B04.tif") == "/data/B04.tif"
    with pytest.raises(LcflowError) as refused:
        remote.refuse_secrets(url, "stac.api")
    assert not any(s in str(refused.value) for s in SECRETS)
    assert "GDAL_HTTP_USERPWD" in str(refused.value) and "GDAL_HTTP_HEADERS" in str(refused.value)


def test_request_headers_come_from_gdal_s_variables_or_netrc(tmp_path):
    basic = "Basic " + base64.b64encode(b"ann:pw").decode()
    assert remote.request_headers("http://h/x", {"GDAL_HTTP_USERPWD": "ann:pw"}) == {"Authorization": basic}
    assert remote.request_headers("http://h/x", {"GDAL_HTTP_HEADERS": "Authorization: Bearer T\r\nX-Key: k"}) == \
        {"Authorization": "Bearer T", "X-Key": "k"}
    (tmp_path / "netrc").write_text("machine h login ann password pw\n")
    assert remote.request_headers("http://h:81/x", {"NETRC": str(tmp_path / "netrc")}) == {"Authorization": basic}
    assert remote.request_headers("http://other/x", {"NETRC": str(tmp_path / "netrc")}) == {}
    assert remote.request_headers("http://h/x", {"NETRC": str(tmp_path / "netrc"), "GDAL_HTTP_NETRC": "NO"}) == {}


def test_a_catalogue_url_with_credentials_is_refused_and_reaches_no_file(demo, tmp_path, capsys):
    with serve(demo / "catalog") as server:
        url = server.url.replace("http://", "http://ann:hunter2@") + "/catalog.json?token=SECRETTOKEN"
        code = main(["search", "--tile", "31UFT", "--year", "2018", "--catalog", url, "--out",
                     str(tmp_path / "items.json")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "carries a user name and password" in err and not any(s in err for s in SECRETS)
    assert list(tmp_path.iterdir()) == [] and server.requests == {}


def test_credentials_go_to_the_catalogue_s_host_and_hrefs_keep_none(demo, tmp_path, monkeypatch, caplog):
    """A catalogue behind basic authentication is read with GDAL_HTTP_USERPWD; the items' own user-info and
    query strings are cut from the manifest, with a warning."""
    root = _catalogue(demo, tmp_path)
    monkeypatch.setenv("GDAL_HTTP_USERPWD", "ann:hunter2")
    with serve(root) as server:
        def secret_hrefs(data, folder):
            for asset in data["assets"].values():
                asset["href"] = (f"http://ann:hunter2@127.0.0.1:{server.server_address[1]}/{folder}/"
                                 f"{Path(asset['href']).name}?token=SECRETTOKEN")
        shutil.rmtree(root)
        _catalogue(demo, tmp_path, secret_hrefs)
        with caplog.at_level("WARNING", logger="lcflow"):
            n = search.run("31UFT", 2018, tmp_path / "items.json", catalog=f"{server.url}/catalog.json")
    written = (tmp_path / "items.json").read_text()
    assert n > 0 and not any(s in written for s in (*SECRETS, "ann"))
    hrefs = [a["href"] for f in json.loads(written)["features"] for a in f["assets"].values()]
    assert all(re.match(rf"{server.url}/31UFT_2018/sentinel-2-l2a/S2\w+/\w+\.tif$", h) for h in hrefs), hrefs[:3]
    basic = "Basic " + base64.b64encode(b"ann:hunter2").decode()
    assert server.authorizations["/catalog.json"] == basic  # the catalogue's requests carry the credentials
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"{len(hrefs)} href(s) carried a user name, password or query string" in said
    assert not any(s in said for s in SECRETS)


def test_credentials_reach_the_catalogue_s_host_alone_and_never_over_plain_http(demo, tmp_path, monkeypatch, caplog):
    """The catalogue on one server, its tile-year's child catalogue, items and scenes on a second: the
    second gets no Authorization while the search reads it, the tokens planted in the items' links reach
    no manifest, and the cube, where GDAL would send GDAL_HTTP_USERPWD to the second host with every read,
    is refused before it reads one byte."""
    from lcflow.retrieve import cube

    from ..conftest import SMALL_AOI

    monkeypatch.setenv("GDAL_HTTP_USERPWD", "ann:hunter2")
    root = _catalogue(demo, tmp_path)
    with serve(root) as first, serve(root) as second:
        def elsewhere(data, folder):
            for asset in data["assets"].values():
                asset["href"] = f"{second.url}/{folder}/{Path(asset['href']).name}"
            for link in data["links"]:
                if link["rel"] in ("self", "collection"):
                    link["href"] = f"{second.url}/{folder}/{data['id']}.json?token=SECRETTOKEN"

        _catalogue(demo, tmp_path / "again", elsewhere)
        shutil.rmtree(root)
        shutil.copytree(tmp_path / "again" / "catalog", root)
        catalog = json.loads((root / "catalog.json").read_text())
        for link in catalog["links"]:
            if link["rel"] == "child":
                link["href"] = f"{second.url}/{link['href'].removeprefix('./')}"
        (root / "catalog.json").write_text(json.dumps(catalog))
        search.run("31UFT", 2018, tmp_path / "items.json", catalog=f"{first.url}/catalog.json")
        assert first.authorizations["/catalog.json"] == "Basic " + base64.b64encode(b"ann:hunter2").decode()
        assert second.authorizations and set(second.authorizations.values()) == {None}
        written = (tmp_path / "items.json").read_text()
        assert "SECRETTOKEN" not in written and "token" not in written
        read_before = dict(second.requests)
        with pytest.raises(LcflowError) as refused:
            cube.run(tmp_path / "items.json", "31UFT", 2018, tmp_path / "cube.tif", tmp_path / "valid.tif",
                     CubeSettings(bands=["B04"], block_px=64), bounds=SMALL_AOI["31UFT"])
        assert dict(second.requests) == read_before  # not a byte read
    message = str(refused.value)
    assert re.match(rf"GDAL_HTTP_USERPWD is set, and GDAL sends it with every request: reading item S2\w+ asset \w+ "
                    rf"\({second.url}/31UFT_2018/\S+\.tif\) would send the credentials to 127\.0\.0\.1:"
                    rf"{second.server_address[1]}, not the host they are for \(127\.0\.0\.1:{first.server_address[1]}\); "
                    r"give them for their host in ~/\.netrc", message), message
    assert not (tmp_path / "cube.tif").exists() and "hunter2" not in message


def test_credentials_are_checked_before_any_read_of_plain_http_or_another_host():
    check = remote.check_credentials_reach
    env = {"GDAL_HTTP_USERPWD": "ann:pw"}
    check([("a", "https://data.example.org/a.tif"), ("b", "https://data.example.org/b.tif")], None, env)
    check([("a", "http://127.0.0.1:8000/a.tif")], "http://127.0.0.1:8000/catalog.json", env)  # never leaves the machine
    check([("a", "http://data.example.org/a.tif")], None, {})  # no credentials: nothing to keep
    check([("a", "http://data.example.org/a.tif")], None, {"NETRC": "/x"})  # netrc goes to its own host only
    with pytest.raises(LcflowError, match=r"reading a \(http://data\.example\.org/a\.tif\) would send the credentials "
                                          r"over plain http"):
        check([("a", "http://data.example.org/a.tif")], "https://data.example.org/v1", env)
    with pytest.raises(LcflowError, match=r"^GDAL_HTTP_HEADERS is set.* to cdn\.example\.org, not the host they are for "
                                          r"\(stac\.example\.org\)"):
        check([("a", "https://cdn.example.org/a.tif")], "https://stac.example.org/v1",
              {"GDAL_HTTP_HEADERS": "X-Trace: 1\r\nAuthorization: Bearer T"})
    with pytest.raises(LcflowError, match=r"reading b .* to h2\.example\.org, not the host they are for \(h1\.example\.org\)"):
        check([("a", "https://h1.example.org/a.tif"), ("b", "https://h2.example.org/b.tif")], "/data/catalog.json", env)


def test_a_needed_query_stays_in_a_manifest_s_href_and_a_secret_goes():
    assert remote.clean_href("https://h/x.tif?v=1&sig=abc&token=T&se=2030") == "https://h/x.tif?v=1"
    assert remote.clean_href("https://ann:pw@h:81/x.tif?format=cog") == "https://h:81/x.tif?format=cog"


def test_a_remote_catalogue_cannot_make_lcflow_read_local_files(demo, tmp_path):
    def local(data, folder):
        data["assets"]["red"]["href"] = "file:///etc/passwd"

    root = _catalogue(demo, tmp_path, local)
    with serve(root) as server:
        with pytest.raises(LcflowError, match=r"item S2\w+ asset red is the local file file:///etc/passwd: a remote "
                                              r"catalogue's assets must be remote"):
            search.run("31UFT", 2018, tmp_path / "items.json", catalog=f"{server.url}/catalog.json")
        catalog = json.loads((root / "catalog.json").read_text())
        catalog["links"].append({"rel": "child", "href": str(root / "sentinel-2-l2a" / "collection.json")})
        (root / "catalog.json").write_text(json.dumps(catalog))
        with pytest.raises(LcflowError, match="links to .*collection.json, which is not an http.s. URL"):
            list(stac_sources.from_catalog(f"{server.url}/catalog.json"))
    assert not (tmp_path / "items.json").exists()


def test_a_static_catalogue_s_items_of_another_collection_are_left_out_named(demo, tmp_path, caplog):
    def l1c(data, folder):
        if data["id"] == "S2A_31UFT_20180118_0_L2A":
            data["collection"] = "sentinel-2-l1c"
        if data["id"] == "S2A_31UFT_20180309_0_L2A":
            data.pop("collection", None)
            data["properties"]["s2:product_type"] = "S2MSI1C"

    root = _catalogue(demo, tmp_path, l1c)
    with caplog.at_level("WARNING", logger="lcflow"):
        search.run("31UFT", 2018, tmp_path / "items.json", catalog=str(root / "catalog.json"))
    manifest = json.loads((tmp_path / "items.json").read_text())
    ids = [f["id"] for f in manifest["features"]]
    left_out = {d["id"]: d["reason"] for d in manifest["lcflow:dropped"]}
    assert left_out == {"S2A_31UFT_20180118_0_L2A": "collection sentinel-2-l1c, not sentinel-2-l2a",
                        "S2A_31UFT_20180309_0_L2A": "product type L1C, not sentinel-2-l2a"}
    assert ids and not set(left_out) & set(ids)
    assert any("2 item(s) of the catalogue left out, not of collection sentinel-2-l2a" in r.getMessage()
               for r in caplog.records)


def test_check_config_and_a_dry_run_refuse_credentials_and_write_none(tmp_path):
    """A config whose catalogue URL carries a password and a token is refused before any job: neither secret
    reaches the console, Snakemake's log or its metadata."""
    over = tmp_path / "secret.yaml"
    over.write_text(yaml.safe_dump({"stac": {"api": "https://ann:hunter2@stac.example.org/v1?token=SECRETTOKEN"}}))
    done = snakemake(tmp_path, "-n", configfile=[ROOT / "config" / "config.yaml", over], timeout=600)
    said = done.stdout + done.stderr
    assert done.returncode != 0 and "stac.api = 'https://stac.example.org/v1' carries a user name and password" in said
    assert not any(s in said for s in SECRETS), said[-2000:]
    written = [f for f in tmp_path.rglob("*") if f.is_file() and f != over]
    assert written == [], written  # refused before Snakemake wrote anything: no log, no metadata
    env = {**os.environ}
    check = subprocess.run([str(Path(sys.executable).parent / "lcflow"), "check-config", "--configfile",
                            str(ROOT / "config" / "config.yaml"), str(over), "--directory", str(ROOT)],
                           capture_output=True, text=True, env=env, timeout=120)
    assert check.returncode == 2 and not any(s in check.stderr for s in SECRETS)
