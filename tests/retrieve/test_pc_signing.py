"""Planetary Computer's asset URLs signed by the real planetary-computer package, its SAS tokens fetched
from a token endpoint on loopback (PC_SDK_SAS_URL): a token is reused while it lives, fetched again once
it is near its expiry, and a file lcflow keeps open is opened again with a fresh signature after
``max_age_s``; no signature reaches an error message."""

import datetime as dt
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import planetary_computer
import pytest
from planetary_computer import sas
from planetary_computer.settings import Settings

from lcflow.retrieve import asset_reader, remote


class TokenServer(ThreadingHTTPServer):
    """GET /token/{account}/{container}: a new SAS token each time, living ``ttl_s`` seconds."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), TokenHandler)
        self.requests: list[str] = []
        self.ttl_s = 3600.0


class TokenHandler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the base class's name
        server = self.server
        server.requests.append(self.path)
        expiry = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=server.ttl_s)
        body = json.dumps({"msft:expiry": expiry.isoformat(),
                           "token": f"st=2026-01-01&se=2026-01-02&sp=rl&sv=2021-06-08&sr=c&sig=token{len(server.requests)}"})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture
def tokens(monkeypatch):
    server = TokenServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("PC_SDK_SAS_URL", f"http://127.0.0.1:{server.server_address[1]}/token")
    Settings.get.cache_clear()
    sas.TOKEN_CACHE.clear()
    yield server
    server.shutdown()
    Settings.get.cache_clear()
    sas.TOKEN_CACHE.clear()


def test_the_real_signer_fetches_a_token_once_and_again_near_its_expiry(tokens, planetary_items):
    sign = remote.signer("auto", planetary_items)
    assert sign is planetary_computer.sign  # the package itself, chosen from where the items' assets are
    href = planetary_items[0].assets["B04"].href
    account, container = href.split("//")[1].split(".")[0], href.split("/")[3]
    assert sign(href) == f"{href}?st=2026-01-01&se=2026-01-02&sp=rl&sv=2021-06-08&sr=c&sig=token1"
    assert sign(planetary_items[1].assets["B08"].href).endswith("sig=token1")  # same container: cached
    assert tokens.requests == [f"/token/{account}/{container}"]
    tokens.ttl_s = 30  # under the package's minute of margin: every signing fetches a new token
    sas.TOKEN_CACHE.clear()
    assert sign(href).endswith("sig=token2") and sign(href).endswith("sig=token3")
    assert len(tokens.requests) == 3


class _Opened:
    """What rasterio.open returns here: a file of one 10 m band block (no network)."""

    block_shapes, dtypes, count = [(1024, 1024)], ["uint16"], 1
    closed = False

    def __init__(self, url):
        self.url = url

    def close(self):
        self.closed = True


def test_a_file_kept_open_is_signed_again_after_max_age(tokens, planetary_items, monkeypatch):
    import rasterio

    opened = []
    monkeypatch.setattr(rasterio, "open", lambda url: opened.append(_Opened(url)) or opened[-1])
    tokens.ttl_s = 30
    href = planetary_items[0].assets["B04"].href
    reader = asset_reader.AssetReader(sign=remote.signer("planetary-computer", planetary_items), max_age_s=0.0)
    assert reader.block_bytes(href) == 1024 * 1024 * 2
    assert reader.block_bytes(href) == 1024 * 1024 * 2
    assert [o.url.rsplit("sig=", 1)[1] for o in opened] == ["token1", "token2"] and opened[0].closed
    kept = asset_reader.AssetReader(sign=remote.signer("planetary-computer", planetary_items), max_age_s=600)
    kept.block_bytes(href), kept.block_bytes(href)
    assert len(opened) == 3  # within max_age the open file is read again, not opened or signed again


def test_a_failing_signed_read_shows_no_signature(tokens, planetary_items, monkeypatch):
    import rasterio

    def refuse(url):
        raise rasterio.errors.RasterioIOError(f"HTTP response code: 403 - {url}")

    monkeypatch.setattr(rasterio, "open", refuse)
    href = planetary_items[0].assets["B04"].href
    reader = asset_reader.AssetReader(sign=remote.signer("planetary-computer", planetary_items))
    monkeypatch.setattr(asset_reader, "_probe", lambda url: "403 Forbidden")
    with pytest.raises(asset_reader.AssetReadError) as err:
        reader.block_bytes(href)
    assert "sig=" not in str(err.value) and "token" not in str(err.value) and "403" in str(err.value)
