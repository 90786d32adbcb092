"""A loopback STAC API for tests: landing page, conformance, item search (POST and GET) with
collections, datetime, intersects, bbox, the query extension and paging by "next" links, over the
items of a static catalog. Enough of the STAC API specification for pystac-client to use it as it
uses Earth Search or Planetary Computer."""

import contextlib
import datetime as dt
import json
import threading
from collections import Counter
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pystac
import shapely.geometry

from .http_server import running

CONFORMS = ["https://api.stacspec.org/v1.0.0/core", "https://api.stacspec.org/v1.0.0/item-search",
            "https://api.stacspec.org/v1.0.0/item-search#query"]
OPS = {"eq": lambda a, b: a == b, "lt": lambda a, b: a < b, "lte": lambda a, b: a <= b,
       "gt": lambda a, b: a > b, "gte": lambda a, b: a >= b}


class Handler(BaseHTTPRequestHandler):
    server: "StacApi"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def do_GET(self):
        url = urlparse(self.path)
        if url.path in ("/", ""):
            self._json(self.server.landing())
        elif url.path == "/conformance":
            self._json({"conformsTo": CONFORMS})
        elif url.path == "/search":
            params = {k: v[0] for k, v in parse_qs(url.query).items()}
            for key in ("collections", "bbox"):
                if key in params:
                    params[key] = params[key].split(",")
            for key in ("intersects", "query"):
                if key in params:
                    params[key] = json.loads(params[key])
            self._search(params)
        else:
            self._json({"code": "NotFound"}, HTTPStatus.NOT_FOUND)

    def do_POST(self):
        if urlparse(self.path).path != "/search":
            self._json({"code": "NotFound"}, HTTPStatus.NOT_FOUND)
            return
        self._search(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}"))

    def _search(self, params: dict) -> None:
        with self.server.lock:
            self.server.searches[self.command] += 1
        if self.server.failing:
            self._json({"code": "InternalServerError", "description": "database unavailable"},
                       HTTPStatus.INTERNAL_SERVER_ERROR)
            return
        found = [f for f in self.server.features if _matches(f, params)]
        limit = int(params.get("limit") or self.server.page_size)
        start = int(params.get("token") or 0)
        page = found[start:start + limit]
        links = []
        if start + limit < len(found):
            links.append({"rel": "next", "href": f"{self.server.url}/search", "method": "POST", "merge": True,
                          "body": {"token": str(start + limit)}, "type": "application/geo+json"})
        self._json({"type": "FeatureCollection", "features": page, "links": links,
                    "numberMatched": len(found), "numberReturned": len(page)}, content_type="application/geo+json")

    def _json(self, body: dict, status: HTTPStatus = HTTPStatus.OK, content_type: str = "application/json") -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _matches(feature: dict, params: dict) -> bool:
    collections = params.get("collections")
    if collections and feature.get("collection") not in collections:
        return False
    if params.get("datetime"):
        start, _, end = params["datetime"].partition("/")
        when = _time(feature["properties"]["datetime"])
        if (start not in ("", "..") and when < _time(start)) or (end not in ("", "..") and when > _time(end)):
            return False
    shape = shapely.geometry.shape(feature["geometry"])
    if params.get("intersects") and not shape.intersects(shapely.geometry.shape(params["intersects"])):
        return False
    if params.get("bbox") and not shape.intersects(shapely.geometry.box(*map(float, params["bbox"]))):
        return False
    for prop, conditions in (params.get("query") or {}).items():
        value = feature["properties"].get(prop)
        if value is None or not all(OPS[op](value, ref) for op, ref in conditions.items()):
            return False
    return True


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


class StacApi(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, catalog: Path, collection: str, page_size: int, assets: tuple[Path, str] | None = None):
        super().__init__(("127.0.0.1", 0), Handler)
        items = pystac.Catalog.from_file(str(catalog)).get_items(recursive=True)
        self.features = []
        for item in items:
            item.make_asset_hrefs_absolute()
            if assets is not None:  # the files as a server that serves ``folder`` at ``url`` has them
                folder, url = assets
                for asset in item.assets.values():
                    asset.href = f"{url}/{Path(asset.href).relative_to(folder.resolve()).as_posix()}"
            feature = item.to_dict(transform_hrefs=False)
            feature["collection"], feature["links"] = collection, []
            self.features.append(feature)
        self.page_size, self.failing = page_size, False
        self.lock = threading.Lock()
        self.searches: Counter[str] = Counter()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def landing(self) -> dict:
        return {"type": "Catalog", "id": "loopback", "stac_version": "1.0.0", "description": "test STAC API",
                "conformsTo": CONFORMS,
                "links": [{"rel": "self", "href": f"{self.url}/", "type": "application/json"},
                          {"rel": "root", "href": f"{self.url}/", "type": "application/json"},
                          {"rel": "conformance", "href": f"{self.url}/conformance", "type": "application/json"},
                          {"rel": "search", "href": f"{self.url}/search", "type": "application/geo+json",
                           "method": "GET"},
                          {"rel": "search", "href": f"{self.url}/search", "type": "application/geo+json",
                           "method": "POST"}]}


@contextlib.contextmanager
def serve_api(catalog: Path, collection: str = "sentinel-2-l2a", page_size: int = 4,
              assets: tuple[Path, str] | None = None) -> Iterator[StacApi]:
    """A STAC API over the items of the static ``catalog``, on a free loopback port for the block; with
    ``assets`` (a folder, the URL a server serves it at), the items' files are that server's URLs, as a
    remote API's are, else local paths."""
    with running(StacApi(catalog, collection, page_size, assets)) as server:
        yield server


def main() -> None:
    """Serve a static catalogue as a STAC API, and the folder that holds it as its files' server, from a
    process of its own (a trial of the workflow against a remote API): prints the API's URL; ends when
    stdin closes."""
    import argparse
    import sys

    from .http_server import serve

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("catalog", type=Path, help="catalog.json of the items")
    ap.add_argument("--files", type=Path, default=None, help="the folder served as their files (the catalogue's)")
    a = ap.parse_args()
    folder = (a.files or a.catalog.parent).resolve()
    with serve(folder) as files, serve_api(a.catalog, assets=(folder, files.url)) as api:
        print(api.url, flush=True)
        for _ in sys.stdin:
            pass


if __name__ == "__main__":
    main()
