"""Dry-run reports of classes of model rows, and enabling enforcement from them (issue 25)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse

from retention.digest import key_digest
from retention.engine import run_execute, run_start
from retention.models import DataClassMode, Policy
from tests.admin.conftest import messages_of, untimed
from tests.rowhost.models import Account, RequestLog

pytestmark = pytest.mark.django_db


@pytest.fixture
def row_classes(
    register_logs: Any, register_accounts: Any, make_policy: Any, now: Any
) -> dict[str, list[Any]]:
    register_logs()
    register_accounts()
    make_policy("logs.request", timedelta(days=30), enforce=False)
    make_policy("accounts.redact", timedelta(days=30), enforce=False, disposition="redact")
    logs = [
        RequestLog.objects.create(tenant_id=tenant, path="/x", created_at=now - timedelta(days=d))
        for tenant, d in (("acme", 45), ("acme", 40), ("acme", 35), ("globex", 50), ("globex", 33))
    ]
    RequestLog.objects.create(tenant_id="acme", path="/new", created_at=now - timedelta(days=2))
    accounts = [
        Account.objects.create(
            tenant_id="acme",
            name=f"n{i}",
            email=f"a{i}@example.com",
            closed_at=now - timedelta(days=60),
        )
        for i in range(2)
    ]
    return {"logs": logs, "accounts": accounts}


def _dry_run(now: Any) -> Any:
    run = run_start(mode="dry_run", data_classes=["logs.request", "accounts.redact"], now=now)
    return run_execute(run=run, clock=lambda: now)


def _section(html: str, name: str) -> str:
    start = html.index(f'data-class="{name}"')
    end = html.find('<div class="module retention-class"', start)
    return html[start : end if end != -1 else len(html)]


def test_report__a_row_class_per_tenant_and_a_sample_by_row_digest(row_classes, bob_client, now):
    run = _dry_run(now)

    html = untimed(
        bob_client.get(reverse("admin:retention_run_report", args=[run.pk])).content.decode()
    )

    logs = _section(html, "logs.request")
    assert "Would delete <strong>5</strong> rows; held <strong>0</strong>" in logs
    assert "<td>acme</td><td>3</td>" in logs
    assert "<td>globex</td><td>2</td>" in logs
    assert "Nothing to delete" not in logs
    assert "No sample." not in logs
    # The oldest due of globex: 50 days old, kept 30: due 20 days before now.
    assert f"<td>{now - timedelta(days=20):%Y-%m-%d %H:%M} UTC</td>" in logs
    # The class's oldest due is that deadline too, not the row's own date.
    due = f"{now - timedelta(days=20):%Y-%m-%d %H:%M} UTC"
    assert f"oldest due {due};" in logs
    # The run's oldest due is the redacting class's: closed 60 days ago, kept 30.
    assert f"(oldest due {now - timedelta(days=30):%Y-%m-%d %H:%M} UTC)" in html
    # A row is no stored object: its sample has no size column, and says why.
    assert "a row has no object size" in logs
    assert "retention-size" not in logs
    for row in row_classes["logs"]:
        digest = key_digest(f"rowhost.RequestLog:{row.pk}")
        assert f"<td>{row.pk}</td><td>{row.tenant_id}</td><td>" in logs
        assert f'<code title="{digest}">{digest[:16]}…</code>' in logs


def test_report__a_redacting_class_would_redact(row_classes, bob_client, now):
    run = _dry_run(now)

    html = untimed(
        bob_client.get(reverse("admin:retention_run_report", args=[run.pk])).content.decode()
    )

    accounts = _section(html, "accounts.redact")
    assert "Would redact <strong>2</strong> rows" in accounts
    assert "Would delete" not in accounts
    for row in row_classes["accounts"]:
        assert key_digest(f"rowhost.Account:{row.pk}") in accounts
    assert "Would delete or redact" in html


def test_enable_enforcement__a_redacting_row_class_says_it_redacts_rows(
    row_classes, bob_client, now
):
    run = _dry_run(now - timedelta(hours=1))

    def enable(data_class: str) -> Any:
        policy = Policy.objects.get(data_class=data_class)
        return bob_client.post(
            reverse("admin:retention_policy_enable", args=[policy.pk]),
            {"run": run.pk, "post": "yes"},
            follow=True,
        )

    response = enable("accounts.redact")
    logs = enable("logs.request")

    assert Policy.objects.get(data_class="accounts.redact").mode == DataClassMode.ENFORCE
    said = " ".join(messages_of(response))
    assert "the next enforcing run redacts its expired rows" in said
    assert "records" not in said
    assert "the next enforcing run deletes its expired rows" in " ".join(messages_of(logs))
