"""Every admin page of a seeded project shows time, durations and lists as people read
them (issue 30, point 1).

The pages are not listed by hand: the test walks the admin's own URLs (each
registered ModelAdmin's, the site's index and app index), fills each object
route with every seeded object of its model, then runs every action on one
object to reach the confirmation pages. A page added later is walked too.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.test import Client
from django.urls import URLPattern, reverse

from retention import api, services
from retention.engine.erasure import erasures_execute
from retention.models import (
    BatchState,
    PolicyVersion,
    RecordState,
    RetentionRecord,
    Run,
    RunBatch,
)
from retention.rest.services import tenant_key_create, tenant_key_revoke
from tests.factories import ReconcileRunFactory, user_with_perms
from tests.helpers import dry_run, enforce, put_tracked
from tests.rowhost.models import Account, RequestLog

pytestmark = pytest.mark.django_db

# What a person must never read on a page.
RAW = {
    "a raw None": re.compile(r"\bNone\b(?!\s+[a-z])"),  # not "None yet", "None available"
    "a timedelta, or seconds shown": re.compile(r"(?<![\dT:])\d+:\d\d:\d\d(?![\dZ])|days?, \d"),
    "microseconds": re.compile(r"\d\.\d{6}\b"),
    "a +00:00 offset": re.compile(r"\+00:00"),
    "a JSON list as text": re.compile(r"\[(&quot;|&#x27;|\"|')"),
    "Django's own date format": re.compile(r"\b[ap]\.m\.|\b(midnight|noon)\b"),
}
# Machines read exports: RFC 3339 with Z, lists as words, never Python's spellings.
RAW_EXPORT = {
    "a +00:00 offset": re.compile(r"\+00:00"),
    "a Python list": re.compile(r"\[(\"|')"),
    "a raw None": re.compile(r"\bNone\b(?!\s+[a-z])"),  # not "None yet", "None available"
}
# The core app's admin and the REST sub-app's (tenant API keys).
APP_LABELS = ("retention", "retention_rest")
PER_MODEL = 12  # objects of each model whose pages are rendered


def _visible(html: str) -> str:
    """The page without its scripts and styles (Django's own JSON settings live there)."""
    return re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.S)


def _problems(url: str, html: str) -> list[str]:
    text = _visible(html)
    found = []
    for what, pattern in RAW.items():
        for match in pattern.finditer(text):
            around = text[max(match.start() - 80, 0) : match.end() + 40].replace("\n", " ")
            found.append(f"{url}: {what}: …{around}…")
            break
    return found


@pytest.fixture
def seeded(make_policy, register_accounts, register_logs, alice, bob, now, settings) -> None:
    """A project with every kind of object the admin shows."""
    settings.RETENTION_BREAKER_MIN_COUNT = 1000
    # Tracked classes: one enforced, one the breaker trips on, one report-only.
    make_policy("idv.photo", timedelta(days=60), safety_margin=timedelta(hours=1))
    make_policy("pod.scan", timedelta(days=30), breaker_min_count=1, breaker_max_fraction=0.1)
    make_policy("billing.invoice", timedelta(days=3650), on_erasure="keep", erasure_basis="Tax law")
    # Rows: redacted by their closing date, deleted by their age.
    register_accounts(subject_field="email")
    make_policy("accounts.redact", timedelta(days=90), disposition="redact")
    register_logs()
    make_policy("logs.request", timedelta(days=7), enforce=False)
    # A second approved version supersedes the first; a draft and a submitted one wait.
    newer = api.propose_policy_version(
        data_class="idv.photo", retention_period=timedelta(days=90), author=alice, now=now
    )
    api.submit_policy_version(newer, by=alice, now=now)
    api.approve_policy_version(newer, approver=bob, now=now)
    submitted = api.propose_policy_version(
        data_class="pod.scan", retention_period=timedelta(days=45), author=alice, now=now
    )
    api.submit_policy_version(submitted, by=alice, now=now)
    api.propose_policy_version(
        data_class="logs.request",
        retention_period=timedelta(days=1, hours=6),
        author=alice,
        now=now,
    )

    for tenant in ("acme", "globex"):
        for i in range(3):
            # Sizes as a host gives them, and one without (a sample says "not recorded").
            put_tracked(tenant_id=tenant, now=now - timedelta(days=100), size=i * 1_200_000 or None)
            put_tracked(tenant_id=tenant, data_class="pod.scan", now=now - timedelta(days=40))
    put_tracked(now=now)
    failed = put_tracked(tenant_id="initech", now=now - timedelta(days=100))
    RetentionRecord.objects.filter(pk=failed.pk).update(
        state=RecordState.FAILED, last_error="SlowDown", attempts=5, lease_expires_at=now
    )
    for i in range(3):
        Account.objects.create(
            tenant_id="acme",
            name=f"A{i}",
            email=f"a{i}@x.test",
            closed_at=now - timedelta(days=200),
        )
        RequestLog.objects.create(
            tenant_id="acme", path=f"/p{i}", created_at=now - timedelta(days=30)
        )

    # Holds: on a tenant, released, and on one row.
    api.place_hold(reason="Litigation 42", placed_by=bob, tenant_id="globex", now=now)
    released = api.place_hold(reason="Audit", placed_by=bob, data_class="pod.scan", now=now)
    api.release_hold(released, released_by=bob, reason="Audit closed", now=now)
    api.place_hold(reason="Dispute", placed_by=bob, subject=Account.objects.first(), now=now)

    # Runs of every mode: a dry run, an enforcing run (with its trip and events),
    # a reconciliation, an erase run; a queued run's batches.
    dry_run(now=now)
    enforce(now=now)
    ReconcileRunFactory(storages={"default": {"orphans": 2, "missing": 1}})
    requester = user_with_perms("dpo", "add_erasurerequest")
    approver = user_with_perms("approver2", "approve_erasurerequest")
    erasure = api.request_erasure(
        requested_by=requester, reason="Art. 17", subject_id="a1@x.test", now=now
    )
    api.approve_erasure(erasure, approver=approver, now=now)
    erasures_execute(clock=lambda: now)
    rejected = api.request_erasure(requested_by=requester, reason="Offboarding", tenant_id="acme")
    api.reject_erasure(rejected, by=approver, reason="Contract still running", now=now)
    api.request_erasure(requested_by=requester, reason="Art. 17", subject_id="a2@x.test", now=now)
    run = Run.objects.filter(mode="enforce").first()
    assert run is not None
    for seq, state in enumerate(BatchState.values):
        RunBatch.objects.create(
            token=uuid.uuid4(),
            run=run,
            data_class="idv.photo",
            size=seq + 1,
            state=state,
            published_at=now,
            lease_expires_at=now + timedelta(minutes=5),
            finished_at=now if state == BatchState.DONE else None,
        )
    # Tenant API keys: one that expires, one revoked, one that never expires.
    tenant_key_create(tenant_id="acme", name="acme CI", expiry_date=now + timedelta(days=90))
    revoked, _ = tenant_key_create(tenant_id="globex", name="globex old")
    tenant_key_revoke(key=revoked, now=now)
    tenant_key_create(tenant_id="initech")
    # The kill switch, paused then resumed: its page shows its history.
    services.kill_switch_pause(by=bob, reason="Incident 7", now=now)
    services.kill_switch_resume(by=bob, now=now)
    assert PolicyVersion.objects.filter(status="draft").exists()


def _routes(model_admin: admin.ModelAdmin[Any]) -> list[str]:
    return [str(p.pattern) for p in model_admin.get_urls() if isinstance(p, URLPattern)]


def _retention_admins() -> list[tuple[Any, admin.ModelAdmin[Any]]]:
    """The app's ModelAdmins (the host's and Django's own are not ours to word)."""
    return [(m, a) for m, a in admin.site._registry.items() if m._meta.app_label in APP_LABELS]


def _pages() -> list[str]:
    """Every admin URL a GET may open, with each object route filled in per object."""
    base = reverse("admin:index")
    urls = [base, *(reverse("admin:app_list", args=[label]) for label in APP_LABELS)]
    for model, model_admin in _retention_admins():
        prefix = f"{base}{model._meta.app_label}/{model._meta.model_name}/"
        pks = [str(pk) for pk in model._default_manager.values_list("pk", flat=True)[:PER_MODEL]]
        for route in _routes(model_admin):
            if "<" not in route:
                urls.append(prefix + route)
                continue
            if not route.startswith("<path:object_id>") or route.count("<") > 1:
                raise AssertionError(f"walk does not know how to fill {route!r}")
            urls.extend(prefix + route.replace("<path:object_id>", pk) for pk in pks)
    return urls


def test_every_admin_page__shows_time_durations_and_lists_as_people_read_them(
    seeded, superuser_client: Client
):
    problems: list[str] = []
    rendered = 0
    for url in _pages():
        response = superuser_client.get(url, follow=True)
        assert response.status_code in (200, 403, 405), f"{url}: {response.status_code}"
        if response.status_code != 200:
            continue  # a POST-only view (approve, enforcement) refuses a GET
        if response.streaming:  # an export: for machines
            body = b"".join(response.streaming_content).decode()
            problems += [f"{url}: {w}" for w, p in RAW_EXPORT.items() if p.search(body)]
            continue
        rendered += 1
        problems += _problems(url, response.content.decode())
    assert rendered > 100
    assert problems == [], "\n".join(problems)


def test_every_admin_action__its_confirmation_or_result_page_reads_the_same(
    seeded, superuser_client: Client
):
    problems: list[str] = []
    acted = 0
    for model, model_admin in _retention_admins():
        changelist = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        pk = model._default_manager.values_list("pk", flat=True).first()
        request = superuser_client.get(changelist).wsgi_request
        for name in model_admin.get_actions(request):
            if pk is None or name == "delete_selected":
                continue
            response = superuser_client.post(
                changelist, {"action": name, ACTION_CHECKBOX_NAME: [str(pk)]}, follow=True
            )
            assert response.status_code == 200, f"{model.__name__}.{name}"
            acted += 1
            problems += _problems(f"{changelist} action {name}", response.content.decode())
    assert acted >= 8
    assert problems == [], "\n".join(problems)
