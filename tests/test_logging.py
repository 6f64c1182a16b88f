"""Structured logs with run, tenant and record ids; never an object key, URL or file name."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages

from retention import engine
from retention.engine.disposal import DisposalItem, ObjectDisposer
from retention.logging import JsonFormatter
from retention.models import RecordState, RunMode
from retention.storage import KeyResult, Outcome
from tests.helpers import add_s3_storage, enforce, put_tracked
from uploads.services import upload_create

REPO = Path(__file__).resolve().parents[1]
FILE_NAME = "Jane Doe passport 7731.jpg"
SAFE_NAME = "Jane-Doe-passport-7731.jpg"
# What config/settings.py keeps at WARNING whatever the root level is.
QUIET_LIBRARIES = ("boto3", "botocore", "s3transfer", "urllib3", "storages")


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def captured() -> Iterator[list[logging.LogRecord]]:
    """Every record at DEBUG, except from the loggers the project sets higher.

    The root logger, Django's and the app's own are opened to DEBUG, as an
    operator chasing a problem might; the libraries that log request URLs
    (QUIET_LIBRARIES) stay at the level the project's LOGGING gives them.
    """
    handler = Capture()
    opened = [logging.getLogger(name) for name in ("", "django", "retention")]
    levels = [logger.level for logger in opened]
    logging.getLogger().addHandler(handler)
    for logger in opened:
        logger.setLevel(logging.DEBUG)
    try:
        yield handler.records
    finally:
        logging.getLogger().removeHandler(handler)
        for logger, level in zip(opened, levels, strict=True):
            logger.setLevel(level)


def texts(record: logging.LogRecord) -> list[str]:
    """Everything a handler could write for this record."""
    return [
        str(record.msg),
        repr(record.args),
        record.getMessage(),
        JsonFormatter().format(record),
        logging.Formatter().format(record),
    ]


def leaks(records: Sequence[logging.LogRecord], secrets: Sequence[str]) -> list[str]:
    return [
        f"{record.name}:{record.levelname}: {record.getMessage()[:200]}"
        for record in records
        if any(secret in text for text in texts(record) for secret in secrets)
    ]


# --------------------------------------------------------------------------
# A full run


@pytest.fixture
def uploads_on_both_storages(make_policy, settings, s3_server, s3_bucket, now) -> dict[str, Any]:
    add_s3_storage(settings, "s3", s3_server.endpoint_url, s3_bucket)
    make_policy(period=timedelta(days=30))
    written = []
    for storage in ("default", "s3"):
        upload = upload_create(
            tenant_id="acme",
            data_class="idv.photo",
            file=ContentFile(b"\xff\xd8\xff\xe0 not really a photo", name=FILE_NAME),
            now=now - timedelta(days=31),
            storage=storage,
        )
        assert storages[storage].exists(upload.object_key)
        written.append(upload)
    keys = [u.object_key for u in written]
    generations = [key.split("/")[2] for key in keys]  # <tenant>/<class>/<uuid>/<name>
    secrets = [
        *keys,
        *(quote(key) for key in keys),
        *generations,
        FILE_NAME,
        SAFE_NAME,
        f"{s3_server.endpoint_url}/{s3_bucket}/",
        storages["default"].path(keys[0]),
    ]
    assert all(SAFE_NAME in key for key in keys)
    return {"uploads": written, "secrets": secrets, "bucket": s3_bucket}


@pytest.mark.django_db
def test_full_run__no_key_url_or_file_name_in_any_log_record(
    uploads_on_both_storages, captured, settings, now
):
    settings.DEBUG = True  # Django logs every SQL statement with its parameters

    run = enforce(now=now)

    assert (run.status, run.deleted) == ("finished", 2)
    for upload in uploads_on_both_storages["uploads"]:
        assert not storages[upload.storage].exists(upload.object_key)
    assert leaks(captured, uploads_on_both_storages["secrets"]) == []
    # Not vacuous: the SQL, the engine's lines and their ids were all captured.
    assert any(r.name == "django.db.backends" for r in captured)
    engine = [r for r in captured if r.name == "retention.engine"]
    assert [r.getMessage().split(":")[0] for r in engine if "page" in r.getMessage()] == [
        f"run {run.pk}"
    ]
    assert {getattr(r, "run_id", None) for r in engine} == {str(run.pk)}
    finished = engine[-1]
    assert finished.getMessage().startswith(f"run {run.pk} finished (enforce): eligible=2")
    assert finished.counts["deleted"] == 2  # type: ignore[attr-defined]


@pytest.mark.django_db
def test_botocore_at_debug_would_log_object_keys(uploads_on_both_storages, captured, now):
    """Why config/settings.py keeps botocore at WARNING: at DEBUG it logs request URLs."""
    botocore = logging.getLogger("botocore")
    assert botocore.level == logging.WARNING
    botocore.setLevel(logging.DEBUG)
    try:
        enforce(now=now)
    finally:
        botocore.setLevel(logging.WARNING)

    s3_key = uploads_on_both_storages["uploads"][1].object_key
    from_botocore = [r for r in captured if r.name.startswith("botocore")]
    assert leaks(from_botocore, [s3_key]) != []
    assert leaks([r for r in captured if r not in from_botocore], [s3_key]) == []


def test_project_logging__keeps_url_logging_libraries_at_warning():
    for name in QUIET_LIBRARIES:
        assert logging.getLogger(name).level == logging.WARNING, name


# --------------------------------------------------------------------------
# Engine log lines carry ids


class Denied(ObjectDisposer):
    def dispose(self, items: Sequence[DisposalItem], **kwargs: Any) -> dict[int, KeyResult]:
        return {
            i.record_id: KeyResult(i.object_key, Outcome.PERMANENT, f"AccessDenied {i.object_key}")
            for i in items
        }


@pytest.mark.django_db
def test_engine_logs__a_failure_names_run_tenant_and_record_never_the_reason(
    make_policy, now, captured
):
    make_policy()
    record = put_tracked(tenant_id="globex", now=now - timedelta(days=31))
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)

    engine.run_execute(run=run, clock=lambda: now, disposer=Denied())

    record.refresh_from_db()
    assert record.state == RecordState.FAILED and record.object_key in record.last_error
    (warning,) = [r for r in captured if r.levelno == logging.WARNING]
    assert warning.getMessage() == (
        f"run {run.pk}: record {record.pk} failed (attempt 1), waiting for review"
    )
    line = json.loads(JsonFormatter().format(warning))
    assert {k: line[k] for k in ("run_id", "tenant_id", "record_id", "data_class")} == {
        "run_id": str(run.pk),
        "tenant_id": "globex",
        "record_id": record.pk,
        "data_class": "idv.photo",
    }
    assert leaks(captured, [record.object_key]) == []


# --------------------------------------------------------------------------
# The formatter


def make_record(**extra: Any) -> logging.LogRecord:
    record = logging.LogRecord(
        "retention.engine", logging.INFO, __file__, 1, "run %s: %d deleted", ("r-1", 3), None
    )
    record.created = 1773489600.25  # 2026-03-14T12:00:00.250Z
    record.__dict__.update(extra)
    return record


def test_json_formatter__one_object_with_the_context_fields():
    record = make_record(run_id="r-1", tenant_id="acme", record_id=7, data_class="idv.photo")

    line = JsonFormatter().format(record)

    assert json.loads(line) == {
        "time": "2026-03-14T12:00:00.250Z",
        "level": "INFO",
        "logger": "retention.engine",
        "message": "run r-1: 3 deleted",
        "run_id": "r-1",
        "tenant_id": "acme",
        "record_id": 7,
        "data_class": "idv.photo",
    }


def test_json_formatter__leaves_out_fields_it_does_not_know():
    line = json.loads(JsonFormatter().format(make_record(request="<GET /x>", counts={"a": 1})))

    assert "request" not in line
    assert line["counts"] == {"a": 1}


def test_json_formatter__an_exception_stays_on_one_line():
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        record = make_record(exc_info=sys.exc_info())

    line = JsonFormatter().format(record)

    assert "\n" not in line
    assert json.loads(line)["exception"].endswith("ValueError: boom\nsecond line")


@pytest.mark.parametrize(
    ("log_format", "expected"),
    [("json", "json"), ("", "text"), ("text", "text")],
)
def test_settings__retention_log_format_json_selects_the_formatter(log_format, expected):
    env = {**os.environ, "RETENTION_LOG_FORMAT": log_format}
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    code = (
        "import django, logging; django.setup(); "
        "logging.getLogger('retention.engine').warning("
        "'run %s failed', 'r-9', extra={'run_id': 'r-9', 'record_id': 4})"
    )

    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )

    (line,) = result.stderr.splitlines()
    if expected == "json":
        entry = json.loads(line)
        assert (entry["level"], entry["logger"], entry["message"]) == (
            "WARNING",
            "retention.engine",
            "run r-9 failed",
        )
        assert (entry["run_id"], entry["record_id"]) == ("r-9", 4)
    else:
        assert line.endswith(" WARNING retention.engine: run r-9 failed")
