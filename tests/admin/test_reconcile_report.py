"""A reconciliation in the admin: listed with the runs, its report by digest, never by key."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.urls import reverse

from retention import engine
from retention.models import RecordState
from tests.helpers import put_tracked

pytestmark = pytest.mark.django_db


def test_reconcile_report__counts_per_storage_and_digests_never_keys(make_policy, bob_client, now):
    make_policy(enforce=False)
    gone = put_tracked(tenant_id="acme", key="acme/gone.jpg", now=now - timedelta(days=2))
    storages["default"].delete(gone.object_key)
    storages["default"].save("acme/stray.jpg", ContentFile(b"abc"))
    run = engine.reconcile_run(now=now)
    gone.refresh_from_db()
    assert gone.state == RecordState.MISSING

    change = bob_client.get(reverse("admin:retention_run_change", args=[run.pk]))
    assert change.status_code == 302
    response = bob_client.get(change["Location"])

    html = response.content.decode()
    assert response.status_code == 200
    assert "Storage default" in html
    assert '<td data-finding="orphans">1</td>' in html
    assert '<td data-finding="missing">1</td>' in html
    assert gone.key_digest in html
    assert "acme/" not in html
    listing = bob_client.get(reverse("admin:retention_run_changelist") + "?mode__exact=reconcile")
    assert str(run.pk)[:8] in listing.content.decode()
