"""Fixtures of the erasure engine's tests: a host with subjects, people, approved requests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages

from retention import api
from retention.anchoring.stores import DirectoryAnchorStore
from retention.models import ErasureRequest, RetentionRecord
from tests.anchoring.helpers import new_key
from tests.factories import user_with_perms
from tests.rowhost.models import Account

BASIS = "Invoices: kept 10 years under tax law."


def track(key: str, subject: str | None, tenant: str = "acme", **kwargs: Any) -> RetentionRecord:
    storages["default"].save(key, ContentFile(b"x"))
    return api.track(
        tenant_id=tenant, data_class="idv.photo", object_key=key, subject_id=subject, **kwargs
    )


@pytest.fixture
def requester(db: Any) -> Any:
    return user_with_perms("dpo", "add_erasurerequest")


@pytest.fixture
def erasure_approver(db: Any) -> Any:
    return user_with_perms("approver2", "approve_erasurerequest")


@pytest.fixture
def host(make_policy, register_accounts, register_logs, now) -> dict[str, Any]:
    """Ann's photos in two tenants and Bob's; their accounts (redacted on erasure); request
    logs without a subject link; invoices kept under a legal basis. Photos are report-only."""
    make_policy("idv.photo", enforce=False)
    register_accounts(subject_field="email")
    make_policy("accounts.redact", timedelta(days=90), disposition="redact")
    register_logs()
    make_policy("logs.request", timedelta(days=7))
    make_policy("billing.invoice", timedelta(days=3650), on_erasure="keep", erasure_basis=BASIS)
    photos = [track(f"acme/{i}.jpg", "ann@x.test") for i in range(3)]
    photos.append(track("globex/ann.jpg", "ann@x.test", tenant="globex"))
    bob = track("acme/bob.jpg", "bob@x.test")
    accounts = [
        # Closed a year ago: her row has an age, as rows the engine measures do.
        Account.objects.create(
            tenant_id="acme", name="Ann", email="ann@x.test", closed_at=now - timedelta(days=365)
        ),
        Account.objects.create(tenant_id="acme", name="Bob", email="bob@x.test"),
    ]
    return {"photos": photos, "bob": bob, "accounts": accounts}


@pytest.fixture
def approved(host, requester, erasure_approver, now) -> Callable[..., ErasureRequest]:
    def make(**kwargs: Any) -> ErasureRequest:
        kwargs.setdefault("subject_id", "ann@x.test")
        request = api.request_erasure(requested_by=requester, reason="Art. 17", now=now, **kwargs)
        return api.approve_erasure(request, approver=erasure_approver, now=now)

    return make


@pytest.fixture
def anchors(settings: Any, tmp_path: Path) -> DirectoryAnchorStore:
    """Anchoring on, into a directory: signed chain heads and the erasure journal."""
    seed, _public = new_key()
    settings.RETENTION_SIGNING_KEY = seed
    settings.RETENTION_EVIDENCE_ANCHOR = str(tmp_path / "anchors")
    return DirectoryAnchorStore(tmp_path / "anchors")
