"""The kill switch from admin, and its banner on every admin page."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from retention import services
from retention.admin.checks import check_kill_switch_banner
from retention.models import KillSwitch
from tests.admin.conftest import messages_of

pytestmark = pytest.mark.django_db

PAGE = "admin:retention_killswitch_changelist"


def test_pause__shows_a_banner_with_who_and_why_on_every_admin_page(bob_client):
    bob_client.post(reverse("admin:retention_pause"), {"reason": "Incident 42: wrong bucket"})

    pages = [
        reverse("admin:index"),
        reverse("admin:retention_run_changelist"),
        reverse("admin:retention_policy_dashboard"),
        reverse("admin:password_change"),  # not a retention page
    ]
    for url in pages:
        html = bob_client.get(url).content.decode()
        assert 'id="retention-kill-switch-banner"' in html, url
        assert "Retention is paused." in html
        assert "Paused by bob" in html
        assert "Incident 42: wrong bucket" in html
    switch = KillSwitch.objects.get()
    assert switch.paused and switch.reason == "Incident 42: wrong bucket"


def test_no_banner_while_running(bob_client):
    html = bob_client.get(reverse("admin:index")).content.decode()

    assert 'id="retention-kill-switch-banner"' not in html


def test_resume__removes_the_banner_and_keeps_its_reason_in_the_history(bob, bob_client, now):
    services.kill_switch_pause(by=bob, reason="incident", now=now)

    response = bob_client.post(
        reverse("admin:retention_resume"), {"reason": "Bucket fixed"}, follow=True
    )

    html = response.content.decode()
    assert 'id="retention-kill-switch-banner"' not in html
    assert "Resumed: Bucket fixed" in html
    assert any("Retention resumed" in m for m in messages_of(response))
    assert KillSwitch.objects.get().paused is False


def test_pause__without_a_reason_is_refused(bob_client):
    response = bob_client.post(reverse("admin:retention_pause"), {"reason": " "})

    assert response.status_code == 200
    assert any("Give a reason" in m for m in messages_of(response))
    assert not KillSwitch.objects.filter(paused=True).exists()


def test_kill_switch__authors_see_its_state_but_cannot_pause(alice_client):
    page = alice_client.get(reverse(PAGE))
    pause = alice_client.post(reverse("admin:retention_pause"), {"reason": "x"})

    assert page.status_code == 200
    assert "Running." in page.content.decode()
    assert 'id="retention-switch-submit"' not in page.content.decode()
    assert pause.status_code == 403


def test_banner_check__passes_with_the_apps_base_template():
    assert check_kill_switch_banner() == []


def test_banner_check__warns_when_a_project_template_hides_the_banner(settings, tmp_path):
    folder = Path(tmp_path) / "templates" / "admin"
    folder.mkdir(parents=True)
    (folder / "base_site.html").write_text('{% extends "admin/base.html" %}')
    settings.TEMPLATES = [
        {**settings.TEMPLATES[0], "DIRS": [str(tmp_path / "templates")]},
    ]

    warnings = check_kill_switch_banner()

    assert [w.id for w in warnings] == ["retention.W001"]
