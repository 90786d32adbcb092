"""A loopback HTTP file server for tests: byte ranges (as GDAL reads COGs), and failures on demand."""

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class Handler(SimpleHTTPRequestHandler):
    """Serves ``directory`` with single byte ranges; answers 503 to the first ``fail_first`` requests of
    each .tif file, and to every .tif request once ``down_after`` of them were served (the server goes down);
    401 to a request without the server's ``password`` (an Authorization header), where it has one."""

    server: "Server"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def do_HEAD(self):
        self._serve(body=False)

    def do_GET(self):
        self._serve(body=True)

    def _serve(self, body: bool) -> None:
        path = Path(self.translate_path(self.path))
        name = self.path.split("?", 1)[0]
        with self.server.lock:
            self.server.requests[name] += 1
            self.server.authorizations[name] = self.headers.get("Authorization")
            tif = name.endswith(".tif")
            self.server.tif_requests += tif
            down = self.server.down_after is not None and self.server.tif_requests > self.server.down_after
            failing = tif and (self.server.requests[name] <= self.server.fail_first or down)
            if failing:
                self.server.statuses[503] += 1
        if failing:
            self.send_error(HTTPStatus.SERVICE_UNAVAILABLE, "busy, try again")
            return
        if self.server.password is not None and self.headers.get("Authorization") != self.server.password:
            self.send_response(HTTPStatus.UNAUTHORIZED)
            self.send_header("WWW-Authenticate", 'Basic realm="lcflow tests"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if not path.is_file():
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        size = path.stat().st_size
        start, end, status = 0, size - 1, HTTPStatus.OK
        spec = self.headers.get("Range")
        if spec and spec.startswith("bytes=") and "," not in spec:
            first, _, last = spec[6:].partition("-")
            start = int(first) if first else max(0, size - int(last))
            end = min(int(last), size - 1) if first and last else size - 1
            if start >= size:
                self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
                self.send_header("Content-Range", f"bytes */{size}")
                self.end_headers()
                return
            status = HTTPStatus.PARTIAL_CONTENT
        with self.server.lock:
            self.server.statuses[int(status)] += 1
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if name.endswith(".json") else "image/tiff")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        if status == HTTPStatus.PARTIAL_CONTENT:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if body:
            with path.open("rb") as fh:  # only the range: a whole-tile band is hundreds of MB
                fh.seek(start)
                left = end + 1 - start
                while left > 0:
                    chunk = fh.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    left -= len(chunk)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, directory: Path, fail_first: int = 0):
        super().__init__(("127.0.0.1", 0), partial(Handler, directory=str(directory)))
        self.fail_first = fail_first
        self.down_after: int | None = None
        self.tif_requests = 0
        self.lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.statuses: Counter[int] = Counter()
        self.authorizations: dict[str, str | None] = {}  # path -> the Authorization header of its last request
        self.password: str | None = None  # an Authorization header every request must carry, else 401

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextlib.contextmanager
def serve(directory: Path, fail_first: int = 0) -> Iterator[Server]:
    """Serve ``directory`` on a free loopback port for the duration of the block."""
    with running(Server(directory, fail_first)) as server:
        yield server


@contextlib.contextmanager
def running(server: ThreadingHTTPServer) -> Iterator[ThreadingHTTPServer]:
    """``server`` answering in a thread of its own for the duration of the block, then closed."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
