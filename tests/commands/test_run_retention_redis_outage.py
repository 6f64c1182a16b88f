"""The Redis broker going down mid-run, on a real qcluster (issue 26, point 3).

A private ``redis-server`` on a free loopback port (no persistence: what was
queued in it is lost with it, as with a Redis restarted without a disk), a
private PostgreSQL cluster (tests/subprocesses.py) and a ``qcluster`` on the Redis
broker. Redis stops for about 20 s while ``run_retention --enqueue --wait``
follows the run, then starts again (empty) on the same port. Measured: the run
ends ``error`` ("task queue unavailable: batches could not be published")
within seconds of Redis going away, what it deleted counted and nothing left
claimed, and ``--wait`` exits 1 saying so; once Redis is back the next
``--enqueue --wait`` finishes the rest and exits 0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.motoserver import free_port
from tests.subprocesses import (
    PrivatePostgres,
    Qcluster,
    assert_all_deleted,
    env_for,
    queue_env,
    seed,
    start_run,
    states,
    wait_until_deleting,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.timeout(180)]


class RedisServer:
    def __init__(self, binary: str, port: int) -> None:
        self.binary, self.port = binary, port
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import redis

        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(self.url, socket_timeout=1).ping()
                return
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not answer in 10 s"
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    if binary is None:
        message = "redis-server not found: the Redis outage test starts one of its own"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {message}")
        pytest.skip(message)
    server = RedisServer(binary, free_port())
    server.start()
    yield server
    server.stop()


def test_run_retention_wait__redis_down_20_s_mid_run_ends_error_exit_1_and_the_next_run_finishes(
    cluster: PrivatePostgres, redis_server: RedisServer, tmp_path: Path
) -> None:
    queued = queue_env("lethe-redis", REDIS_URL=redis_server.url)
    workers = Qcluster(env=env_for(cluster, **queued), log=tmp_path / "qcluster.log")
    data_class = seed(cluster, count=200, rate=10)  # 10 records a page, about 20 s
    workers.start()
    try:
        waiter = start_run(cluster, data_class, "--enqueue", "--wait", **queued)
        try:
            wait_until_deleting(cluster, data_class, waiter)
            redis_server.stop()
            down_at = time.monotonic()
            out, err = waiter.communicate(timeout=40)
        finally:
            waiter.kill()
            waiter.communicate()
        # The run ends error while Redis is away: its batches cannot be published.
        report = json.loads(out.strip().splitlines()[-1])
        assert report["status"] == "error", report
        assert report["status_reason"] == "task queue unavailable: batches could not be published"
        assert waiter.returncode == 1
        assert "Traceback" not in err
        assert err.strip().splitlines()[-1] == (
            f"CommandError: run {report['run_id']} ended error: "
            "task queue unavailable: batches could not be published"
        )
        # What it deleted is counted; nothing is left claimed.
        left = states(cluster, data_class)
        assert left == {"deleted": report["counts"]["deleted"], "active": 200 - left["deleted"]}
        assert 0 < left["deleted"] < 200

        time.sleep(max(0.0, 20 - (time.monotonic() - down_at)))
        redis_server.start()  # empty: what was queued in it is gone
        again = start_run(cluster, data_class, "--enqueue", "--wait", **queued)
        try:
            out, err = again.communicate(timeout=60)
        finally:
            again.kill()
            again.communicate()
    finally:
        workers.stop()

    assert again.returncode == 0, f"{err}\n{workers.logs()}"
    assert json.loads(out.strip().splitlines()[-1])["status"] == "finished"
    assert_all_deleted(cluster, data_class, 200)
