"""api.holds(): a host finds the hold it placed, to release it, without importing models."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from retention import api
from tests.rowhost.models import RequestLog

pytestmark = pytest.mark.django_db


def test_api_holds__finds_holds_by_the_scope_they_name_oldest_first(
    author: Any, approver: Any, now: datetime
):
    acme = api.place_hold(
        reason="acme case", placed_by=author, tenant_id="acme", now=now + timedelta(minutes=1)
    )
    acme_logs = api.place_hold(
        reason="acme logs",
        placed_by=author,
        tenant_id="acme",
        data_class="logs.api",
        now=now + timedelta(minutes=2),
    )
    logs = api.place_hold(
        reason="logs", placed_by=author, data_class="logs.api", now=now + timedelta(minutes=3)
    )
    row = RequestLog.objects.create(tenant_id="acme", path="/", created_at=now)
    one_row = api.place_hold(
        reason="one row", placed_by=author, subject=row, now=now + timedelta(minutes=4)
    )

    assert list(api.holds()) == [acme, acme_logs, logs, one_row]
    assert list(api.holds(tenant_id="acme")) == [acme, acme_logs]
    assert list(api.holds(data_class="logs.api")) == [acme_logs, logs]
    assert list(api.holds(tenant_id="acme", data_class="logs.api")) == [acme_logs]
    assert list(api.holds(tenant_id="globex")) == []


def test_api_holds__active_by_default_released_or_both_on_request(
    author: Any, approver: Any, now: datetime
):
    kept = api.place_hold(reason="kept", placed_by=author, tenant_id="acme", now=now)
    gone = api.place_hold(reason="settled", placed_by=author, tenant_id="acme", now=now)
    [found] = [h for h in api.holds(tenant_id="acme") if h.reason == "settled"]

    api.release_hold(found, released_by=approver, reason="case closed", now=now)

    assert list(api.holds(tenant_id="acme")) == [kept]
    assert list(api.holds(tenant_id="acme", active=False)) == [gone]
    assert set(api.holds(tenant_id="acme", active=None)) == {kept, gone}
    assert "holds" in api.__all__
