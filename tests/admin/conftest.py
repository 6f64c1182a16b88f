"""Users in the two governance groups, and clients logged in as them."""

from __future__ import annotations

import re
from datetime import datetime
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from retention.services.governance import APPROVERS_GROUP, AUTHORS_GROUP


@pytest.fixture(autouse=True)
def _fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def now() -> datetime:
    # The admin reads the real clock; data built around it must agree.
    return timezone.now().replace(microsecond=0)


@pytest.fixture
def groups(db: Any) -> None:
    call_command("retention_setup_groups", stdout=StringIO())


def _member(username: str, *group_names: str) -> Any:
    user = get_user_model().objects.create_user(
        username, f"{username}@example.com", "pw", is_staff=True
    )
    for name in group_names:
        user.groups.add(Group.objects.get(name=name))
    return get_user_model().objects.get(pk=user.pk)


@pytest.fixture
def alice(groups: None) -> Any:
    """Writes policy versions."""
    return _member("alice", AUTHORS_GROUP)


@pytest.fixture
def bob(groups: None) -> Any:
    """Approves them, and governs holds, enforcement and the kill switch."""
    return _member("bob", APPROVERS_GROUP)


@pytest.fixture
def carol(groups: None) -> Any:
    """In both groups: may write and approve, but never her own version."""
    return _member("carol", AUTHORS_GROUP, APPROVERS_GROUP)


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alice_client(alice: Any) -> Client:
    return _client(alice)


@pytest.fixture
def bob_client(bob: Any) -> Client:
    return _client(bob)


@pytest.fixture
def carol_client(carol: Any) -> Client:
    return _client(carol)


@pytest.fixture
def superuser_client(db: Any) -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    return _client(user)


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


def untimed(html: str) -> str:
    """The page with its ``<time>`` tags taken out: an instant as the text a person reads."""
    return re.sub(r"</?time\b[^>]*>", "", html)
