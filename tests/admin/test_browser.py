"""The governance flow in a real browser (Debian's Chromium through Playwright).

An author drafts and submits a version; an approver reviews its impact and
approves it; a dry run is made from the command; the approver enables
enforcement from the dry-run report; the dashboard is photographed into
``test-output/``. With ``LETHE_SCREENSHOTS=docs/img/admin`` the test also
saves the documentation's pictures of each step there (1200x800 viewport
shots, never by default).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.db import connection, connections

from retention.models import DataClassMode, Policy, PolicyVersion, PolicyVersionStatus, Run
from retention.services.governance import APPROVERS_GROUP, AUTHORS_GROUP
from tests.browser import CHROMIUM_ARGS, chromium_executable
from tests.helpers import put_tracked

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OUTPUT = Path(__file__).resolve().parents[2] / "test-output"
DOCS_VIEWPORT = {"width": 1200, "height": 800}


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    # Playwright's sync API runs an event loop in this thread; the test's own
    # ORM calls would otherwise be refused as "called from an async context".
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=chromium_executable(), args=CHROMIUM_ARGS
        )
        yield chromium
        # The test's queries ran while Playwright's loop was running, on
        # connections of that context: closed here, in it, so the next
        # browser test does not find them terminated below.
        connections.close_all()
        chromium.close()
    _close_live_server_connections()


def _close_live_server_connections() -> None:
    """End the database sessions the live server's request threads left open.

    Each keep-alive socket is served by a thread with its own connection;
    one of them can outlive its thread, and PostgreSQL then refuses to drop
    the test database at the end of the session.
    """
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
        "process_request_thread" in thread.name for thread in threading.enumerate()
    ):
        time.sleep(0.05)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )


def _user(username: str, group: str) -> Any:
    user = get_user_model().objects.create_user(username, password="pw", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def _log_in(browser: Any, base_url: str, username: str) -> Any:
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{base_url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", "pw")
    page.click("input[type=submit]")
    page.wait_for_url(f"{base_url}/admin/")
    return page


def _messages(page: Any) -> str:
    return page.inner_text("ul.messagelist")


def _docs_shot(page: Any, name: str, *, scroll_to: str | None = None) -> None:
    """Save ``<LETHE_SCREENSHOTS>/<name>.png`` for the docs; nothing when unset."""
    directory = os.environ.get("LETHE_SCREENSHOTS")
    if not directory:
        return
    Path(directory).mkdir(parents=True, exist_ok=True)
    size = page.viewport_size
    page.set_viewport_size(DOCS_VIEWPORT)
    if scroll_to:
        page.locator(scroll_to).first.scroll_into_view_if_needed()
    page.screenshot(path=str(Path(directory) / f"{name}.png"))
    page.set_viewport_size(size)


def test_browser__draft_approve_dry_run_enable_enforcement_and_dashboard(
    browser, live_server, make_policy, now
):
    started = time.monotonic()
    call_command("retention_setup_groups", stdout=StringIO())
    _user("alice", AUTHORS_GROUP)
    _user("bob", APPROVERS_GROUP)
    make_policy(period=timedelta(days=30), enforce=False)
    make_policy(data_class="logs.integration", period=timedelta(days=7), enforce=False)
    for tenant, age in [("acme", 45), ("acme", 40), ("globex", 35), ("globex", 20), ("acme", 3)]:
        # Sizes as an upload gives them: the report's sample (and its screenshot) shows them.
        put_tracked(tenant_id=tenant, now=now - timedelta(days=age), size=age * 61_000)
    for age in (12, 9, 2):
        put_tracked(tenant_id="acme", data_class="logs.integration", now=now - timedelta(days=age))
    OUTPUT.mkdir(exist_ok=True)
    base = live_server.url

    # The author drafts a 60-day version from the policy page and submits it.
    alice = _log_in(browser, base, "alice")
    alice.goto(f"{base}/admin/retention/policy/")
    alice.click("text=idv.photo")
    alice.click("text=Draft a new version")
    assert alice.input_value("#id_retention_period") == "30 days"
    alice.fill("#id_retention_period", "60 days")
    alice.fill("#id_notes", "Customers asked for a longer window.")
    _docs_shot(alice, "draft-version", scroll_to="#id_retention_period")
    alice.click("input[name=_continue]")
    alice.click("#retention-submit-version")
    assert "a second person must now review" in _messages(alice)
    _docs_shot(alice, "version-submitted")
    version = PolicyVersion.objects.get(number=2)
    assert version.status == PolicyVersionStatus.SUBMITTED

    # The approver picks it from the list, reviews the impact, approves.
    bob = _log_in(browser, base, "bob")
    bob.goto(f"{base}/admin/retention/policyversion/?status__exact=submitted")
    bob.check(f"input[name=_selected_action][value='{version.pk}']")
    bob.select_option("select[name=action]", "review_and_approve")
    _docs_shot(bob, "versions-waiting")
    bob.click("button[name=index]")
    preview = bob.inner_text("#retention-impact-preview")
    assert "changes no existing deadline" in preview
    assert "acme" in bob.inner_text("#retention-impact-tenants")
    assert "60 days" in bob.inner_text("#retention-version-diff")
    bob.screenshot(path=str(OUTPUT / "admin-review.png"), full_page=True)
    _docs_shot(bob, "version-diff")
    _docs_shot(bob, "impact-preview", scroll_to="#retention-impact-preview")
    bob.click("#retention-approve")
    assert "approved and in force" in _messages(bob)
    version.refresh_from_db()
    assert version.status == PolicyVersionStatus.APPROVED

    # A dry run from the command, then enforcement from its report.
    call_command("run_retention", "--dry-run", stdout=StringIO(), stderr=StringIO())
    dry_run = Run.objects.get(mode="dry_run")
    bob.goto(f"{base}/admin/")
    bob.click("text=Dry-run reports")
    bob.click(f"a[href$='/{dry_run.pk}/report/']")
    assert "Would delete 3" in bob.inner_text(".retention-class[data-class='idv.photo']")
    bob.screenshot(path=str(OUTPUT / "admin-dry-run-report.png"), full_page=True)
    _docs_shot(bob, "dry-run-report")
    bob.click("a[data-enable='idv.photo']")
    # The confirmation says what the next run will do, from this dry run's counts.
    assert "Delete: 3 expired records" in bob.inner_text(".retention-outlook")
    _docs_shot(bob, "enable-confirmation")
    bob.click("#retention-confirm-enable")
    assert "Enforcement enabled for idv.photo" in _messages(bob)
    _docs_shot(bob, "enforcement-enabled")
    policy = Policy.objects.get(data_class="idv.photo")
    assert policy.mode == DataClassMode.ENFORCE
    assert policy.reviewed_dry_run_id == dry_run.pk

    # An enforcing sweep, so the dashboard has deletions to draw.
    call_command("run_retention", "--data-class", "idv.photo", stdout=StringIO(), stderr=StringIO())
    bob.goto(f"{base}/admin/")
    bob.click("#retention-governance >> text=Dashboard")
    assert "idv.photo" in bob.inner_text("#retention-classes")
    assert bob.locator("svg.retention-svg rect.bar").count() == 31
    shot = OUTPUT / "admin-dashboard.png"
    bob.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    _docs_shot(bob, "dashboard")
    if os.environ.get("LETHE_SCREENSHOTS"):
        # Pages the flow does not need, visited only for the docs' pictures.
        for path, name in [
            ("retention/policy/", "policy-list"),
            ("retention/legalhold/add/", "legal-hold-place"),
            ("retention/killswitch/", "kill-switch"),
        ]:
            bob.goto(f"{base}/admin/{path}")
            _docs_shot(bob, name)
    print(f"\nbrowser flow took {time.monotonic() - started:.1f}s; screenshot: {shot}")
