"""moto in server mode on a free loopback port: the S3 endpoint of the tests and the benchmarks.

One launcher for both. Plain Python, no pytest: ``tests/s3server.py`` makes
it a session fixture, and the benchmark scripts, run from the repository
root, import it beside ``benchmarks.common``. Failing to start raises
``MotoDidNotStart`` with the server's output; each caller says so its way
(a failed session, a script's exit).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REGION = "us-east-1"
DUMMY_CREDENTIALS = "testing"
START_TIMEOUT = 20.0

# Dummy credentials and no profile or config file, so that nothing a test or
# a benchmark does can reach (or be billed by) the real AWS, even from a
# logged-in shell.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": DUMMY_CREDENTIALS,
    "AWS_SECRET_ACCESS_KEY": DUMMY_CREDENTIALS,
    "AWS_SECURITY_TOKEN": DUMMY_CREDENTIALS,
    "AWS_SESSION_TOKEN": DUMMY_CREDENTIALS,
    "AWS_DEFAULT_REGION": REGION,
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    "AWS_EC2_METADATA_DISABLED": "true",
}
AWS_ENV_REMOVED = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


class MotoDidNotStart(RuntimeError):
    """moto_server is missing, or did not answer in time; the message has its output."""


@dataclass(frozen=True)
class MotoServer:
    endpoint_url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers_http(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # any HTTP answer means it is serving
    except OSError:
        return False


def start(log_path: Path) -> MotoServer:
    """Start ``moto_server`` (next to the running interpreter) on a free port, logging to a file."""
    executable = Path(sys.executable).parent / "moto_server"
    if not executable.exists():
        raise MotoDidNotStart(
            f"moto_server not found next to {sys.executable}; install moto[server]"
        )
    port = free_port()
    endpoint_url = f"http://127.0.0.1:{port}"
    # A file, not a pipe: moto logs every request and a full pipe would
    # block the server in the middle of a large test or benchmark.
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(executable), "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    server = MotoServer(endpoint_url, process, log_path)
    deadline = time.monotonic() + START_TIMEOUT
    while not _answers_http(endpoint_url):
        if process.poll() is not None or time.monotonic() > deadline:
            stop(server)
            raise MotoDidNotStart(
                f"moto_server did not start on {endpoint_url} "
                f"(exit code {process.returncode}); output:\n{server.output()}"
            )
        time.sleep(0.1)
    return server


def stop(server: MotoServer) -> None:
    process = server.process
    if process.poll() is not None:
        return
    # moto ignores SIGTERM for seconds; SIGINT stops it promptly.
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
