"""A loopback HTTP file server for tests: byte ranges (as GDAL reads COGs), and failures on demand."""

import contextlib
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

#: what a file's next request may meet (Server.faults): 429 with Retry-After, an HTML page with status 200,
#: a body that ends halfway (the connection closed), a body that stops halfway and stalls, a ranged answer
#: whose header is right and whose bytes are another file's (``other``: the file's ``.other`` twin), a body
#: gzip-encoded whatever the request accepts
FAULTS = ("429", "html", "truncate", "stall", "other", "gzip")


class Handler(SimpleHTTPRequestHandler):
    """Serves ``directory`` with single byte ranges; answers 503 to the first ``fail_first`` requests of
    each .tif file, and to every .tif request once ``down_after`` of them were served (the server goes down);
    401 to a request without the server's ``password`` (an Authorization header), where it has one; a
    file's next GET meets the first of its ``faults`` (FAULTS). Every answer waits ``delay_s`` first, and
    each connection sends at most ``rate`` bytes a second; ``sent`` counts the body bytes sent. Each file has
    an ETag and a Last-Modified (unless ``validators`` is off), which ``If-Range`` is compared with (the whole
    file where it differs); ``head`` off answers HEAD with 405, ``lengths`` off sends no Content-Length."""

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
        if self.server.delay_s:
            time.sleep(self.server.delay_s)
        with self.server.lock:
            fault = self.server.faults[name].pop(0) if body and self.server.faults.get(name) else None
            if fault:
                self.server.statuses[fault] += 1
        if fault in ("429", "html"):
            page = b"<!DOCTYPE html><html><body>Please log in</body></html>"
            self.send_response(HTTPStatus.TOO_MANY_REQUESTS if fault == "429" else HTTPStatus.OK)
            if fault == "429":
                self.send_header("Retry-After", str(self.server.retry_after_s))
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        with self.server.lock:
            self.server.requests[name] += 1
            self.server.authorizations[name] = self.headers.get("Authorization")
            self.server.headers_seen.append(dict(self.headers))
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
        if name in self.server.redirects:
            self.send_response(HTTPStatus.FOUND)
            self.send_header("Location", self.server.redirects[name])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if not path.is_file():
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        if not body and not self.server.head:
            self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault == "gzip":
            import gzip

            packed = gzip.compress(path.read_bytes())
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "image/tiff")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(packed)))
            self.end_headers()
            self.wfile.write(packed)
            return
        size, stat = path.stat().st_size, path.stat()
        etag = f'"{stat.st_ino:x}-{stat.st_size:x}-{stat.st_mtime_ns:x}"'
        modified = self.date_time_string(int(stat.st_mtime))
        start, end, status = 0, size - 1, HTTPStatus.OK
        spec = self.headers.get("Range")
        condition = self.headers.get("If-Range")
        if condition is not None and condition not in (etag, modified):
            spec = None  # changed since: the whole file (RFC 9110, 13.1.5)
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
        if self.server.lengths:
            self.send_header("Content-Length", str(end - start + 1))
        if self.server.validators:
            self.send_header("ETag", etag)
            self.send_header("Last-Modified", modified)
        if status == HTTPStatus.PARTIAL_CONTENT:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if fault == "other" and status == HTTPStatus.PARTIAL_CONTENT:
            path = path.with_name(path.name + ".other")
        if body:
            self._body(path, start, end + 1 - start, fault)
        if not self.server.lengths:
            self.close_connection = True

    def _body(self, path: Path, start: int, length: int, fault: str | None) -> None:
        """``length`` bytes of ``path`` from ``start`` (only the range: a whole-tile band is hundreds of MB), at
        most the server's ``rate`` a second; half of them where a fault breaks the body off."""
        left = length // 2 if fault in ("truncate", "stall") else length
        began, sent = time.monotonic(), 0
        step = 1 << 16 if self.server.rate else 1 << 20
        with path.open("rb") as fh:
            fh.seek(start)
            while left > 0:
                chunk = fh.read(min(left, step))
                if not chunk:
                    break
                try:
                    self.wfile.write(chunk)
                except OSError:  # the client hung up (a killed stage-in)
                    return
                sent += len(chunk)
                left -= len(chunk)
                with self.server.lock:
                    self.server.sent += len(chunk)
                if self.server.rate:
                    ahead = sent / self.server.rate - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)
        if fault == "stall":
            self.wfile.flush()
            time.sleep(self.server.stall_s)
        self.close_connection = True


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
        self.faults: defaultdict[str, list[str]] = defaultdict(list)  # path -> what its next GETs meet (FAULTS)
        self.retry_after_s = 1  # the Retry-After of a 429
        self.stall_s = 30.0  # how long a stalled body stays silent
        self.delay_s = 0.0  # the wait before every answer
        self.rate: float | None = None  # bytes a second each connection sends at most
        self.sent = 0  # body bytes sent
        self.validators = True  # ETag and Last-Modified sent
        self.head = True  # HEAD answered (else 405)
        self.lengths = True  # Content-Length sent
        self.headers_seen: list[dict[str, str]] = []  # every request's headers, in order
        self.redirects: dict[str, str] = {}  # path -> the URL a request for it is redirected to (302)

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


def main() -> None:
    """Serve a folder from a process of its own (benchmarks/stage_in.py): prints its URL, then on each line
    read from stdin the body bytes sent so far; ends when stdin closes."""
    import argparse
    import sys

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("directory", type=Path)
    ap.add_argument("--delay-s", type=float, default=0.0, help="wait before every answer")
    ap.add_argument("--rate", type=float, default=None, help="bytes a second each connection sends at most")
    a = ap.parse_args()
    with serve(a.directory) as server:
        server.delay_s, server.rate = a.delay_s, a.rate
        print(server.url, flush=True)
        for _ in sys.stdin:
            print(server.sent, flush=True)


if __name__ == "__main__":
    main()
