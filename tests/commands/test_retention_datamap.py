"""`retention_datamap [--json] [--strict]`: every model governed, exempt, internal or named.

The host model is ``rowhost.Subscriber``: an email field of the host's own
subclass and a GenericIPAddressField, named so that only their types give
them away. The test settings install other apps (and their ungoverned
models), so the strict runs narrow the map to what a test looks at by
exempting everything else, and assertions name specific models, never a total.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from freezegun import freeze_time

from retention import services
from retention.selectors.datamap import ungoverned_personal_models
from tests.factories import ReconcileRunFactory
from tests.helpers import put_tracked
from tests.rowhost.models import Subscriber

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
SUBSCRIBERS = "marketing.subscribers"


def _call(*args: str) -> str:
    out = StringIO()
    call_command("retention_datamap", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def _analyze(*tables: str) -> None:
    """On PostgreSQL the map shows the planner's estimates: make them today's."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f"ANALYZE {connection.ops.quote_name(table)}")


def _models(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["model"]: m for m in found["models"]}


@pytest.fixture
def only_subscriber_left(settings: Any, row_registry: Any) -> dict[str, str]:
    """Every other ungoverned model with personal-looking fields exempted, as a host would."""
    others = {
        **getattr(settings, "RETENTION_EXEMPT_MODELS", {}),
        **{
            label: "not under test"
            for label, _ in ungoverned_personal_models()
            if label != "rowhost.Subscriber"
        },
    }
    settings.RETENTION_EXEMPT_MODELS = others
    return others


def test_datamap__strict_fails_naming_an_unregistered_model_and_both_its_fields(
    only_subscriber_left,
):
    with pytest.raises(CommandError) as failed:
        _call("--strict")

    message = str(failed.value)
    assert failed.value.returncode == 1
    assert "rowhost.Subscriber (contact, origin)" in message
    assert "1 ungoverned model with personal-looking fields" in message


def test_datamap__lists_the_subclassed_email_and_the_ip_field_with_why(only_subscriber_left):
    found = json.loads(_call("--json"))

    subscriber = _models(found)["rowhost.Subscriber"]
    assert subscriber["status"] == "ungoverned"
    assert subscriber["personal_fields"] == [
        {"field": "contact", "why": "email address (LowercaseEmailField)"},
        {"field": "origin", "why": "IP address (GenericIPAddressField)"},
    ]
    assert {"model": "rowhost.Subscriber", "fields": ["contact", "origin"]} in found["ungoverned"]


def test_datamap__strict_passes_once_the_model_is_registered(
    only_subscriber_left, row_registry, make_policy, now
):
    row_registry.register_model(Subscriber, data_class=SUBSCRIBERS, age_field="created_at")
    make_policy(SUBSCRIBERS, timedelta(days=60), enforce=False)
    Subscriber.objects.create(contact="a@example.com", created_at=now - timedelta(days=3))
    Subscriber.objects.create(contact="b@example.com", created_at=now - timedelta(days=1))
    _analyze(Subscriber._meta.db_table)

    with freeze_time(now):
        out = _call("--strict")
        found = json.loads(_call("--json", "--strict"))

    subscriber = _models(found)["rowhost.Subscriber"]
    assert subscriber["status"] == "governed"
    (governance,) = subscriber["data_classes"]
    assert governance["data_class"] == SUBSCRIBERS
    assert governance["policy_version"] == 1
    assert governance["retention_period"] == "P60DT00H00M00S"
    assert governance["disposition"] == "delete"
    assert governance["oldest_row_at"] == "2026-03-11T12:00:00Z"
    # Its version says what an erasure does (as its disposition); no subject link.
    assert (governance["on_erasure"], governance["subject_field"]) == ("delete", None)
    assert subscriber["rows"] == 2
    assert found["ungoverned"] == []
    assert "rowhost.Subscriber (2 rows)" in out or "rowhost.Subscriber (~2 rows)" in out
    assert f"{SUBSCRIBERS}: version 1, 60 days, delete" in out
    assert "oldest row 2026-03-11 12:00 UTC" in out
    assert "Strict: no model with personal-looking fields is ungoverned." in out


def test_datamap__a_registration_without_an_approved_version_is_governed_and_says_so(
    only_subscriber_left, row_registry, author, now
):
    row_registry.register_model(Subscriber, data_class=SUBSCRIBERS, age_field="created_at")
    before_any_policy = _call("--strict")
    services.policy_version_propose(
        data_class=SUBSCRIBERS, retention_period=timedelta(days=60), author=author, now=now
    )

    out = _call("--strict")
    subscriber = _models(json.loads(_call("--json")))["rowhost.Subscriber"]

    assert f"{SUBSCRIBERS}: no policy yet;" in before_any_policy
    assert f"{SUBSCRIBERS}: no approved version;" in out
    assert subscriber["status"] == "governed"
    assert subscriber["data_classes"][0]["note"] == "no approved version"
    assert subscriber["data_classes"][0]["policy_version"] is None


def test_datamap__strict_passes_for_a_model_exempt_with_a_reason_and_shows_it(
    only_subscriber_left, settings
):
    reason = "Double opt-in proofs, kept as evidence of consent (Art. 7(1) GDPR)."
    settings.RETENTION_EXEMPT_MODELS = {**only_subscriber_left, "rowhost.Subscriber": reason}
    _analyze(Subscriber._meta.db_table)

    out = _call("--strict")
    found = json.loads(_call("--json"))

    assert f"rowhost.Subscriber (0 rows): {reason}" in out or (
        f"rowhost.Subscriber (~0 rows): {reason}" in out
    )
    subscriber = _models(found)["rowhost.Subscriber"]
    assert (subscriber["status"], subscriber["reason"]) == ("exempt", reason)


def test_datamap__an_exemption_without_a_reason_is_a_configuration_error(
    only_subscriber_left, settings
):
    settings.RETENTION_EXEMPT_MODELS = {**only_subscriber_left, "rowhost.Subscriber": "  "}

    with pytest.raises(CommandError, match=r"RETENTION_EXEMPT_MODELS\['rowhost.Subscriber'\] "):
        _call()
    with pytest.raises(CommandError, match="has no reason"):
        _call("--strict")


def test_datamap__lists_third_party_auto_created_and_django_bookkeeping_tables():
    _analyze("django_migrations")
    found = _models(json.loads(_call("--json")))

    assert found["auth.User_groups"]["note"] == "many-to-many table of auth.User"
    assert found["django_q.Success"]["note"] == "proxy of django_q.Task"
    assert found["migrations.Migration"]["status"] == "internal"
    assert found["migrations.Migration"]["rows"] > 0
    assert found["contenttypes.ContentType"]["status"] == "internal"
    assert found["retention.RetentionRecord"]["status"] == "internal"
    assert found["rowhost.Account"]["status"] == "ungoverned"
    assert found["auth.User"]["status"] == "exempt"  # by the example project's settings
    # The example host's own row classes, registered in UploadsConfig.ready().
    assert found["uploads.ApiRequestLog"]["status"] == "governed"


def test_datamap__tracked_classes_with_their_store_and_records_and_each_store_its_orphans(
    make_policy, now
):
    make_policy("idv.photo", timedelta(days=30))
    put_tracked(data_class="idv.photo", now=now)
    put_tracked(data_class="idv.photo", now=now)
    finished = datetime(2026, 3, 14, 8, 2, tzinfo=UTC)
    ReconcileRunFactory(
        storages={"default": {"orphans": 3, "listed": 5, "tracked": 2}}, finished_at=finished
    )
    _analyze("retention_retentionrecord")

    out = _call()
    found = json.loads(_call("--json"))

    (photo,) = [t for t in found["tracked_classes"] if t["data_class"] == "idv.photo"]
    assert (photo["storage"], photo["records"], photo["policy_version"]) == ("default", 2, 1)
    (default,) = [s for s in found["stores"] if s["storage"] == "default"]
    assert default["last_reconciliation"]["orphans"] == 3
    assert default["last_reconciliation"]["finished_at"] == "2026-03-14T08:02:00Z"
    records = "~2" if found["counts_are_estimates"] else "2"
    assert f"idv.photo in default: {records} records not deleted; version 1, 30 days" in out
    assert "last reconciled 2026-03-14 08:02 UTC: 3 untracked objects" in out


@pytest.mark.postgres
def test_datamap__on_postgresql_rows_are_the_planners_estimates(only_subscriber_left):
    Subscriber.objects.bulk_create(
        Subscriber(contact=f"s{i}@example.com", created_at=datetime(2026, 1, 1, tzinfo=UTC))
        for i in range(40)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Subscriber._meta.db_table}")

    found = json.loads(_call("--json"))
    out = _call()

    subscriber = _models(found)["rowhost.Subscriber"]
    assert (subscriber["rows"], subscriber["rows_estimated"]) == (40, True)
    assert found["counts_are_estimates"] is True
    assert "rowhost.Subscriber (~40 rows)" in out


def test_datamap__the_example_project_is_clean_under_strict(tmp_path):
    """The example project as `make demo` runs it: its own settings, a fresh SQLite file."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "LETHE_VAR_DIR": str(tmp_path),
        "DATABASE_URL": "",
        "AWS_STORAGE_BUCKET_NAME": "",
        "REDIS_URL": "",
    }
    manage = [sys.executable, str(ROOT / "manage.py")]
    migrate = subprocess.run(
        [*manage, "migrate", "--noinput", "-v", "0"], env=env, capture_output=True, text=True
    )
    assert migrate.returncode == 0, migrate.stderr

    result = subprocess.run(
        [*manage, "retention_datamap", "--strict"], env=env, capture_output=True, text=True
    )

    assert result.returncode == 0, result.stderr
    assert "Strict: no model with personal-looking fields is ungoverned." in result.stdout
    assert "auth.User (0 rows): " in result.stdout  # exempt, with the project's reason


@pytest.mark.postgres
def test_datamap__on_postgresql_a_tracked_class_without_records_shows_an_exact_zero(
    make_policy, now
):
    make_policy("idv.photo", timedelta(days=30))
    make_policy("pod.scan", timedelta(days=90))
    for _ in range(3):
        put_tracked(data_class="idv.photo", now=now)
    _analyze("retention_retentionrecord")

    tracked = {t["data_class"]: t for t in json.loads(_call("--json"))["tracked_classes"]}

    assert (tracked["pod.scan"]["records"], tracked["pod.scan"]["records_estimated"]) == (0, False)
    assert tracked["idv.photo"]["records"] == 3
    assert tracked["idv.photo"]["records_estimated"] is True
