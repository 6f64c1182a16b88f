"""The `run_retention` command as an operator and a cron job see it (SPEC §3.1)."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from freezegun import freeze_time

from retention import api, engine
from retention.models import DeletionEvent, RecordState, Run, RunMode, RunStatus
from tests.helpers import exists, gone, kept, put_tracked
from tests.subprocesses import manage_py

CONTRACT_KEYS = {
    "run_id",
    "mode",
    "cutoff",
    "status",
    "counts",
    "oldest_eligible_at",
    "started_at",
    "finished_at",
}
COUNT_KEYS = {
    "eligible",
    "claimed",
    "deleted",
    "already_absent",
    "skipped_held",
    "skipped_renewed",
    "deferred",
    "failed",
    "redacted",
    "skipped_protected",
    "tripped",
}

pytestmark = pytest.mark.django_db


def run_command(*args: str, at: datetime) -> tuple[str, str]:
    stdout, stderr = StringIO(), StringIO()
    with freeze_time(at):
        call_command("run_retention", *args, stdout=stdout, stderr=stderr)
    return stdout.getvalue(), stderr.getvalue()


def refused(*args: str, at: datetime) -> CommandError:
    with pytest.raises(CommandError) as excinfo, freeze_time(at):
        call_command("run_retention", *args, stdout=StringIO(), stderr=StringIO())
    return excinfo.value


def parse_rfc3339_utc(value: str) -> datetime:
    assert value.endswith("Z"), value
    parsed = datetime.fromisoformat(value)
    assert parsed.utcoffset() == timedelta(0)
    return parsed


def assert_one_line_reason(error: CommandError) -> None:
    message = str(error)
    assert message.strip()
    assert "\n" not in message.strip()
    assert error.returncode != 0


# --------------------------------------------------------------------------
# --json


def test_run_retention__json_prints_one_object_with_the_contract_keys(make_policy, now):
    make_policy("idv.photo", timedelta(days=30))
    put_tracked(now=now - timedelta(days=40))
    put_tracked(now=now - timedelta(days=31))
    put_tracked(now=now - timedelta(days=1))

    out, _ = run_command("--json", at=now)

    data = json.loads(out)
    assert isinstance(data, dict)
    assert set(data) >= CONTRACT_KEYS
    assert set(data["counts"]) == COUNT_KEYS
    assert all(type(value) is int for value in data["counts"].values())
    for name in ("cutoff", "started_at", "finished_at", "oldest_eligible_at"):
        parse_rfc3339_utc(data[name])


def test_run_retention__json_values_match_the_run_row(make_policy, now):
    make_policy("idv.photo", timedelta(days=30))
    oldest = put_tracked(now=now - timedelta(days=40))
    put_tracked(now=now - timedelta(days=31))
    put_tracked(now=now - timedelta(days=1))

    out, _ = run_command("--json", at=now)

    data = json.loads(out)
    run = Run.objects.get(pk=data["run_id"])
    assert Run.objects.count() == 1
    assert data["mode"] == run.mode == RunMode.ENFORCE
    assert data["status"] == run.status == RunStatus.FINISHED
    assert data["counts"] == run.counts()
    assert data["counts"]["eligible"] == 2
    assert data["counts"]["deleted"] == 2
    assert parse_rfc3339_utc(data["cutoff"]) == run.cutoff
    assert parse_rfc3339_utc(data["started_at"]) == run.started_at == now
    assert parse_rfc3339_utc(data["finished_at"]) == run.finished_at == now
    assert parse_rfc3339_utc(data["oldest_eligible_at"]) == run.oldest_eligible_at
    assert run.oldest_eligible_at == oldest.expires_at


def test_run_retention__json_cutoff_is_the_start_minus_the_safety_margin(make_policy, now):
    make_policy("idv.photo", timedelta(days=30), safety_margin=timedelta(hours=6))

    out, _ = run_command("--json", "--dry-run", at=now)

    data = json.loads(out)
    assert parse_rfc3339_utc(data["cutoff"]) == now - timedelta(hours=6)
    assert data["cutoff"] == "2026-03-14T06:00:00Z"


def test_run_retention__json_times_are_utc_whatever_the_project_time_zone(
    make_policy, now, settings
):
    settings.TIME_ZONE = "America/New_York"
    make_policy("idv.photo", timedelta(days=30))

    out, _ = run_command("--json", "--dry-run", at=now)

    data = json.loads(out)
    assert data["cutoff"] == "2026-03-14T12:00:00Z"
    assert data["started_at"] == "2026-03-14T12:00:00Z"


def test_run_retention__json_of_a_refused_run_still_prints_its_ledger_row(
    make_policy, approver, now
):
    make_policy("idv.photo", timedelta(days=30))
    api.pause(by=approver, reason="incident 42", now=now)
    stdout = StringIO()

    with pytest.raises(CommandError), freeze_time(now):
        call_command("run_retention", "--json", stdout=stdout, stderr=StringIO())

    data = json.loads(stdout.getvalue())
    assert data["status"] == RunStatus.REFUSED
    assert data["run_id"] == str(Run.objects.get().pk)


# --------------------------------------------------------------------------
# Dry run and enforce, human output


def test_run_retention__dry_run_says_would_delete_and_touches_nothing(make_policy, now):
    make_policy("idv.photo", timedelta(days=30))
    old = put_tracked(now=now - timedelta(days=31))

    out, err = run_command("--dry-run", at=now)

    assert "would delete" in out.lower()
    assert "deleted" not in (out + err).lower()
    old.refresh_from_db()
    assert exists(old)
    assert old.state == RecordState.ACTIVE
    assert not DeletionEvent.objects.exists()
    run = Run.objects.get()
    assert run.mode == RunMode.DRY_RUN
    assert run.status == RunStatus.FINISHED
    assert run.eligible == 1
    assert run.deleted == 0


def test_run_retention__dry_run_reports_a_report_only_class_too(make_policy, now):
    make_policy("idv.photo", timedelta(days=30), enforce=False)
    old = put_tracked(now=now - timedelta(days=31))

    out, _ = run_command("--dry-run", "--data-class", "idv.photo", at=now)

    assert "idv.photo: would delete 1" in out
    assert kept(old)


def test_run_retention__enforce_summarises_what_it_deleted(make_policy, now):
    make_policy("idv.photo", timedelta(days=30))
    old = [put_tracked(now=now - timedelta(days=31 + i)) for i in range(2)]
    young = put_tracked(now=now - timedelta(days=1))

    out, _ = run_command(at=now)

    assert "deleted 2" in out
    assert "would delete" not in out.lower()
    for record in old:
        assert gone(record)
    assert kept(young)
    run = Run.objects.get()
    assert (run.status, run.deleted) == (RunStatus.FINISHED, 2)


def test_run_retention__enforce_writes_progress_to_the_command_stderr(make_policy, now, capsys):
    make_policy("idv.photo", timedelta(days=30))
    put_tracked(now=now - timedelta(days=31))

    out, err = run_command(at=now)

    # Progress belongs on the stream the caller handed in, not on the
    # process's own stderr, or call_command(stderr=...) cannot capture it.
    assert "claimed 1/1" in err
    assert capsys.readouterr().err == ""
    assert "claimed 1/1" not in out


# --------------------------------------------------------------------------
# Refusals: non-zero exit with a one-line reason


def test_run_retention__unknown_data_class_is_refused_with_one_line(make_policy, now):
    make_policy("idv.photo", timedelta(days=30))
    old = put_tracked(now=now - timedelta(days=31))

    error = refused("--data-class", "unknown", at=now)

    assert_one_line_reason(error)
    assert "unknown" in str(error)
    assert kept(old)


def test_run_retention__enforcing_a_report_only_class_is_refused(make_policy, now):
    make_policy("idv.photo", timedelta(days=30), enforce=False)
    old = put_tracked(now=now - timedelta(days=31))

    error = refused("--data-class", "idv.photo", at=now)

    assert_one_line_reason(error)
    assert "report-only" in str(error)
    assert kept(old)
    assert Run.objects.get().status == RunStatus.REFUSED


def test_run_retention__paused_is_refused_and_the_refusal_is_in_the_ledger(
    make_policy, approver, now
):
    make_policy("idv.photo", timedelta(days=30))
    old = put_tracked(now=now - timedelta(days=31))
    api.pause(by=approver, reason="incident 42", now=now - timedelta(minutes=5))

    error = refused(at=now)

    assert_one_line_reason(error)
    assert "paused" in str(error)
    run = Run.objects.get()
    assert run.status == RunStatus.REFUSED
    assert "paused" in run.status_reason
    assert kept(old)


def test_run_retention__second_trigger_while_the_lease_is_held_is_refused(make_policy, now):
    make_policy("idv.photo", timedelta(days=30))
    old = put_tracked(now=now - timedelta(days=31))
    first = engine.run_start(mode=RunMode.ENFORCE, now=now - timedelta(seconds=10))

    error = refused(at=now)

    assert_one_line_reason(error)
    assert "lease" in str(error)
    second = Run.objects.exclude(pk=first.pk).get()
    assert second.status == RunStatus.REFUSED
    assert (second.claimed, second.deleted) == (0, 0)
    assert kept(old)
    assert not DeletionEvent.objects.exists()
    first.refresh_from_db()
    assert first.status == RunStatus.RUNNING


@pytest.mark.parametrize("args", [("--limit", "0"), ("--max-seconds", "0")])
def test_run_retention__non_positive_bounds_are_refused(make_policy, now, args):
    make_policy("idv.photo", timedelta(days=30))

    error = refused(*args, at=now)

    assert_one_line_reason(error)
    assert args[0] in str(error)
    assert not Run.objects.exists()


# --------------------------------------------------------------------------
# Scope


def test_run_retention__limit_deletes_exactly_that_many_and_stops(make_policy, now):
    make_policy("idv.photo", timedelta(days=30))
    first = put_tracked(now=now - timedelta(days=32))
    second = put_tracked(now=now - timedelta(days=31))

    out, _ = run_command("--limit", "1", "--json", at=now)

    data = json.loads(out)
    assert data["status"] == RunStatus.STOPPED
    assert data["counts"]["deleted"] == 1
    assert Run.objects.get().status == RunStatus.STOPPED
    # Claims go in expires_at order, so the older record goes first.
    assert gone(first)
    assert kept(second)


def test_run_retention__tenant_limits_deletion_to_that_tenant(make_policy, now):
    make_policy("idv.photo", timedelta(days=30))
    ours = put_tracked(tenant_id="acme", now=now - timedelta(days=31))
    theirs = put_tracked(tenant_id="globex", now=now - timedelta(days=31))

    out, _ = run_command("--tenant", "acme", "--json", at=now)

    data = json.loads(out)
    assert data["counts"]["deleted"] == 1
    assert Run.objects.get().tenant_id == "acme"
    assert gone(ours)
    assert kept(theirs)


def test_run_retention__data_class_limits_deletion_to_that_class(make_policy, now):
    make_policy("idv.photo", timedelta(days=30))
    make_policy("pod.scan", timedelta(days=30))
    photo = put_tracked(data_class="idv.photo", now=now - timedelta(days=31))
    scan = put_tracked(data_class="pod.scan", now=now - timedelta(days=31))

    run_command("--data-class", "pod.scan", at=now)

    assert kept(photo)
    assert gone(scan)
    assert Run.objects.get().data_classes == ["pod.scan"]


# --------------------------------------------------------------------------
# A real process, as cron runs it


def _subprocess_env(var_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in (
        "DATABASE_URL",
        "AWS_STORAGE_BUCKET_NAME",
        "REDIS_URL",
        "LETHE_MEDIA_ROOT",
        "DJANGO_SETTINGS_MODULE",
    ):
        env.pop(name, None)
    env["LETHE_VAR_DIR"] = str(var_dir)
    return env


@pytest.fixture(scope="module")
def migrated_env(tmp_path_factory: pytest.TempPathFactory) -> Any:
    # One migrated SQLite file for the module: migrating takes seconds.
    env = _subprocess_env(tmp_path_factory.mktemp("lethe-var"))
    migrate = manage_py(env, "migrate", "--noinput", "-v", "0")
    assert migrate.returncode == 0, migrate.stderr
    return env


def test_run_retention__process_exits_zero_and_prints_one_json_object(migrated_env):
    result = manage_py(migrated_env, "run_retention", "--json", "--dry-run")

    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["mode"] == RunMode.DRY_RUN
    assert data["status"] == RunStatus.FINISHED
    assert set(data["counts"]) == COUNT_KEYS


def test_run_retention__process_refusal_exits_non_zero_with_one_line_on_stderr(migrated_env):
    result = manage_py(migrated_env, "run_retention", "--data-class", "nope")

    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "nope" in lines[0]
    assert result.stdout == ""
