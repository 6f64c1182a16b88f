"""An HTTP proxy that holds every request a fixed time: a local S3 server "a network away".

``scale_out.py`` puts it in front of moto: each request sleeps ``--delay-ms``
in its own thread, then goes on to the upstream server, so concurrent
requests wait concurrently, as they would on a real network. Connections to
the proxy stay open (HTTP/1.1 keep-alive, as boto3's pool expects), and each
connection's thread keeps its own upstream connection. It runs in a process
of its own so that its CPU time can be read apart from the engine's.

``GET /__proxy__/stats`` (answered at once, not delayed) returns the requests
forwarded, the most in flight at once, and the instant and key count of each
DeleteObjects request (``POST ?delete``): ``scale_out.py`` measures the rate
gate's achieved rate from them. ``POST /__proxy__/reset`` clears them.

    python benchmarks/latency_proxy.py --upstream http://127.0.0.1:5000 --delay-ms 150 --port 0
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

STATS_PATH = "/__proxy__/stats"
RESET_PATH = "/__proxy__/reset"
# Not passed on: they describe one hop (RFC 9110 §7.6.1).
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
}


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.deletes: list[tuple[float, int]] = []

    def as_json(self) -> bytes:
        with self.lock:
            return json.dumps(
                {
                    "requests": self.requests,
                    "max_in_flight": self.max_in_flight,
                    "deletes": self.deletes,
                }
            ).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    server: ProxyServer

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        if self.path == STATS_PATH:
            self.answer(200, self.server.stats.as_json())
        else:
            self.forward()

    def do_POST(self) -> None:
        if self.path == RESET_PATH:
            with self.server.stats.lock:
                self.server.stats.reset()
            self.answer(204, b"")
        else:
            self.forward()

    def answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def upstream(self) -> http.client.HTTPConnection:
        # One upstream connection per client connection (this thread's).
        if getattr(self, "_upstream", None) is None:
            host, port = self.server.upstream
            self._upstream = http.client.HTTPConnection(host, port, timeout=60)
        return self._upstream

    def forward(self) -> None:
        stats = self.server.stats
        body = self.read_body()
        with stats.lock:
            stats.requests += 1
            stats.in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
            if self.command == "POST" and "delete" in urllib.parse.urlsplit(self.path).query:
                stats.deletes.append((time.time(), body.count(b"<Key>")))
        try:
            time.sleep(self.server.delay)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            headers["Content-Length"] = str(len(body))
            try:
                response = self.send_upstream(body, headers)
            except (OSError, http.client.HTTPException):
                self._upstream = None  # the server closed it: once more on a new one
                response = self.send_upstream(body, headers)
            data = response.read()
            if response.will_close:
                self.upstream().close()
        finally:
            with stats.lock:
                stats.in_flight -= 1
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_PUT = do_DELETE = do_HEAD = forward

    def send_upstream(self, body: bytes, headers: dict[str, str]) -> http.client.HTTPResponse:
        connection = self.upstream()
        connection.request(self.command, self.path, body=body, headers=headers)
        return connection.getresponse()


class ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, port: int, upstream: str, delay: float) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        parts = urllib.parse.urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.delay = delay
        self.stats = Stats()


# --------------------------------------------------------------------------
# The benchmark's side: the proxy as a subprocess


@dataclass
class Proxy:
    endpoint_url: str
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.endpoint_url + STATS_PATH, timeout=10) as response:
            stats: dict[str, Any] = json.load(response)
            return stats

    def reset(self) -> None:
        request = urllib.request.Request(self.endpoint_url + RESET_PATH, method="POST")
        urllib.request.urlopen(request, timeout=10).close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def start(upstream: str, delay_ms: float) -> Proxy:
    """The proxy on a free loopback port in front of ``upstream``; it prints its URL first."""
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve())]
        + ["--upstream", upstream, "--delay-ms", str(delay_ms), "--port", "0"],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode().strip()
    if not line.startswith("http://"):
        process.kill()
        raise SystemExit(f"the latency proxy did not start: {line!r}")
    return Proxy(line, process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="the server's URL")
    parser.add_argument("--delay-ms", type=float, default=150.0, help="delay of every request")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    args = parser.parse_args()
    server = ProxyServer(args.port, args.upstream, args.delay_ms / 1000)
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
