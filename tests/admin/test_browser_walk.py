"""A governance owner's whole walk in a real browser, a tracked class and a row class.

author → approver rejects with a reason → the author changes and re-submits →
approval → a dry run → enabling enforcement through its confirmation → the
enforcing run's page → its events → a legal hold → its release. Every page
on the way is checked for raw values a person should never read (a raw
``None``, a Python timedelta, microseconds, ``+00:00``, a JSON list, Django's
own date format), the patterns ``test_rendering`` holds every admin page to.
With ``LETHE_SCREENSHOTS=docs/img/admin`` each step is saved for the
governance page (``walk-*.png``).
"""

from __future__ import annotations

import re
import time
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from retention.models import DataClassMode, LegalHold, Policy, PolicyVersion, PolicyVersionStatus
from retention.services.governance import APPROVERS_GROUP, AUTHORS_GROUP
from tests.admin.test_browser import _docs_shot, _log_in, _messages, _user, browser
from tests.admin.test_rendering import RAW
from tests.helpers import put_tracked
from tests.rowhost.models import RequestLog

__all__ = ["browser"]  # the fixture, shared with the other browser test

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _clean(page: Any, step: str) -> None:
    """The page a person reads holds none of the raw values (``RAW``)."""
    text = page.inner_text("#content")
    found = [f"{what}: {m.group(0)!r}" for what, rx in RAW.items() for m in [rx.search(text)] if m]
    assert not found, f"{step}: {found}"


def _step(page: Any, name: str, **shot: Any) -> None:
    _clean(page, name)
    _docs_shot(page, f"walk-{name}", **shot)


def test_browser_walk__reject_resubmit_approve_enable_run_events_hold_release(
    browser, live_server, make_policy, register_logs, now
):
    started = time.monotonic()
    call_command("retention_setup_groups", stdout=StringIO())
    _user("alice", AUTHORS_GROUP)
    _user("bob", APPROVERS_GROUP)
    make_policy(period=timedelta(days=30), enforce=False)
    register_logs()
    make_policy("logs.request", timedelta(days=7), enforce=False)
    for tenant, age in [("acme", 45), ("acme", 40), ("globex", 35), ("acme", 3)]:
        put_tracked(tenant_id=tenant, now=now - timedelta(days=age))
    for tenant, age in [("acme", 20), ("acme", 12), ("globex", 9), ("acme", 1)]:
        RequestLog.objects.create(
            tenant_id=tenant, path="/orders", created_at=now - timedelta(days=age)
        )
    base = live_server.url

    # The author drafts a 60-day version of idv.photo and submits it.
    alice = _log_in(browser, base, "alice")
    alice.goto(f"{base}/admin/retention/policy/")
    alice.click("text=idv.photo")
    alice.click("text=Draft a new version")
    alice.fill("#id_retention_period", "60 days")
    alice.fill("#id_notes", "Customers asked for a longer window.")
    _step(alice, "01-draft", scroll_to="#id_retention_period")
    alice.click("input[name=_continue]")
    alice.click("#retention-submit-version")
    version = PolicyVersion.objects.get(policy__data_class="idv.photo", number=2)
    assert version.status == PolicyVersionStatus.SUBMITTED

    # The approver finds it in the inbox, reviews it and rejects it with a reason.
    bob = _log_in(browser, base, "bob")
    _step(bob, "02-inbox")
    assert "idv.photo version 2 waits for your approval" in bob.inner_text("#retention-inbox")
    bob.click("#retention-inbox tr[data-inbox=waiting] a")
    _step(bob, "03-review")
    bob.click("#retention-reject")
    bob.fill("textarea", "Say which contract asks for 60 days.")
    _step(bob, "04-reject")
    bob.click("#retention-confirm-reject")
    version.refresh_from_db()
    assert (version.status, version.rejection_reason) == (
        PolicyVersionStatus.DRAFT,
        "Say which contract asks for 60 days.",
    )

    # The author reads why, changes the draft and submits it again.
    alice.goto(f"{base}/admin/")
    assert "Say which contract asks for 60 days." in alice.inner_text("#retention-inbox")
    _step(alice, "05-returned")
    alice.click("#retention-inbox tr[data-inbox=returned] a")
    alice.fill("#id_notes", "Customers asked for a longer window: MSA 2026-14, clause 9.")
    alice.click("input[name=_continue]")
    alice.click("#retention-submit-version")
    assert "a second person must now review" in _messages(alice)

    # Approved this time.
    bob.goto(f"{base}/admin/retention/policyversion/{version.pk}/review/")
    bob.click("#retention-approve")
    assert "approved and in force" in _messages(bob)
    _step(bob, "06-approved")

    # A dry run; enforcement enabled for each class through its confirmation page.
    call_command("run_retention", "--dry-run", stdout=StringIO(), stderr=StringIO())
    bob.goto(f"{base}/admin/")
    bob.click("text=Dry-run reports")
    bob.click("a[href$='/report/']")
    _step(bob, "07-dry-run-report")
    for data_class in ("idv.photo", "logs.request"):
        bob.click(f"a[data-enable='{data_class}']")
        outlook = bob.inner_text(".retention-outlook")
        assert re.search(r"(Delete|Redact)", outlook), outlook
        _step(bob, f"08-enable-{data_class.replace('.', '-')}")
        bob.click("#retention-confirm-enable")
        assert f"Enforcement enabled for {data_class}" in _messages(bob)
        bob.go_back()
        bob.go_back()
    assert set(Policy.objects.values_list("mode", flat=True)) == {DataClassMode.ENFORCE}

    # The enforcing run: its page leads with what happened per class, then its events.
    call_command("run_retention", stdout=StringIO(), stderr=StringIO())
    bob.goto(f"{base}/admin/retention/run/?mode__exact=enforce")
    bob.click("#result_list tbody tr >> nth=0 >> a >> nth=0")
    outcomes = bob.inner_text(".retention-run-outcomes")
    assert "idv.photo" in outcomes and "logs.request" in outcomes
    _step(bob, "09-run-page")
    bob.click(".retention-run-events")
    events = bob.inner_text("#result_list")
    assert "idv.photo" in events and "logs.request" in events
    _step(bob, "10-events")

    # A legal hold on acme's photos, then its release with a reason.
    bob.goto(f"{base}/admin/retention/legalhold/add/")
    bob.fill("#id_tenant_id", "acme")
    bob.select_option("#id_data_class", "idv.photo")
    bob.fill("#id_reason", "Litigation 2026-7: acme v. initech")
    _step(bob, "11-hold-place")
    bob.click("input[name=_save]")
    hold = LegalHold.objects.get()
    bob.goto(f"{base}/admin/retention/legalhold/{hold.pk}/change/")
    _step(bob, "12-hold")
    bob.goto(f"{base}/admin/retention/legalhold/")
    bob.check(f"input[name=_selected_action][value='{hold.pk}']")
    bob.select_option("select[name=action]", "release_hold")
    bob.click("button[name=index]")
    bob.fill("textarea", "Case settled on 2026-04-02.")
    _step(bob, "13-hold-release")
    bob.click("input[type=submit].default")
    hold.refresh_from_db()
    assert hold.released_at is not None
    print(f"\nbrowser walk took {time.monotonic() - started:.1f}s")
