"""S3 unreachable: one WARNING per run as it meets the outage, one as it ends with the count.

moto holds the objects, reached through a small TCP proxy that listens only
while a run checks its store (a real HeadBucket through it): right after, it
stops listening and every connection is refused, as a store that stopped
answering mid-run.
Inline runs through ``run_retention``, in one process: each run says once that
the store does not answer and, as it ends, how many of its deletes were
retried for that, counted from its own events; never a key or the URL.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from retention.models import RecordState, RetentionRecord, Run
from tests.helpers import add_s3_storage, put_tracked

pytestmark = pytest.mark.django_db(transaction=True)


class Proxy:
    """Forwards loopback connections to moto between ``listen()`` and ``refuse()``."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.open: list[socket.socket] = []
        self.listen(0)
        self.port = self.listener.getsockname()[1]
        self.endpoint_url = f"http://127.0.0.1:{self.port}"

    def listen(self, port: int | None = None) -> None:
        self.listener = socket.create_server(("127.0.0.1", self.port if port is None else port))
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self.open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def refuse(self) -> None:
        # shutdown() wakes the thread blocked in accept(), so the port is free again.
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        for sock in self.open:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.fixture
def proxy(s3_server: Any) -> Iterator[Proxy]:
    running = Proxy(s3_server.endpoint_url)
    yield running
    running.refuse()


def run_class(data_class: str) -> dict[str, Any]:
    out = StringIO()
    call_command(
        "run_retention", "--data-class", data_class, "--json", stdout=out, stderr=StringIO()
    )
    report: dict[str, Any] = json.loads(out.getvalue())
    return report


def test_s3_unreachable__each_run_warns_once_as_it_meets_it_and_once_as_it_ends_with_its_count(
    make_policy, now, settings, s3_server, s3_bucket, caplog, proxy, monkeypatch
):
    from retention.storage.s3 import S3Adapter

    add_s3_storage(settings, "vault", s3_server.endpoint_url, s3_bucket)
    records = {}
    for data_class, count in (("idv.photo", 3), ("idv.scan", 2)):
        make_policy(data_class)
        records[data_class] = [
            put_tracked(
                data_class=data_class,
                key=f"tenant-1/{data_class}/secret-{n}.jpg",
                storage="vault",
                now=now - timedelta(days=40),
            )
            for n in range(count)
        ]
    add_s3_storage(settings, "vault", proxy.endpoint_url, s3_bucket)
    proxy.refuse()
    checked = S3Adapter.check

    def check_then_go_down(self: S3Adapter) -> None:
        proxy.listen()
        checked(self)
        proxy.refuse()

    monkeypatch.setattr(S3Adapter, "check", check_then_go_down)

    with caplog.at_level(logging.INFO):
        first = run_class("idv.photo")
        at_first = len(caplog.records)
        second = run_class("idv.scan")

    # Every attempt at every record went unanswered (the inline run retries them).
    assert first["retried"] >= 3 and second["retried"] >= 2
    assert first["counts"]["deleted"] == second["counts"]["deleted"] == 0
    warnings = [
        [
            r.getMessage()
            for r in caplog.records[start:end]
            if r.levelno == logging.WARNING and r.name == "retention.storage"
        ]
        for start, end in ((0, at_first), (at_first, len(caplog.records)))
    ]
    for report, told in zip((first, second), warnings, strict=True):
        assert len(told) == 2, told
        assert told[0].startswith("storage 'vault': the S3 endpoint does not answer")
        assert told[1] == (
            f"run {report['run_id']}: {report['retried']} deletes were retried "
            "because storage 'vault' did not answer"
        )
    for message in warnings[0] + warnings[1]:
        assert "secret-" not in message and proxy.endpoint_url not in message
        assert s3_bucket not in message
    assert set(RetentionRecord.objects.values_list("state", flat=True)) == {RecordState.FAILED}
    assert Run.objects.count() == 2


def test_s3_unreachable__a_run_whose_retries_were_not_for_no_answer_says_nothing_of_it(
    make_policy, now, settings, s3_server, s3_bucket, caplog, monkeypatch
):
    from retention.storage import KeyResult, Outcome
    from retention.storage.s3 import S3Adapter

    add_s3_storage(settings, "vault", s3_server.endpoint_url, s3_bucket)
    make_policy()
    put_tracked(key="tenant-1/secret-0.jpg", storage="vault", now=now - timedelta(days=40))

    def slow_down(self: Any, keys: Any, **kwargs: Any) -> Any:
        return {key: KeyResult(key, Outcome.TRANSIENT, "InternalError: try again") for key in keys}

    monkeypatch.setattr(S3Adapter, "delete_many", slow_down)
    with caplog.at_level(logging.INFO):
        report = run_class("idv.photo")

    assert report["retried"] > 0
    assert not [r for r in caplog.records if "did not answer" in r.getMessage()]
