"""Seed rows of the host's own tables (request logs, customer accounts), and say so."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from uploads.apps import CLOSED_ACCOUNTS, REQUEST_LOGS
from uploads.demo.formatting import Out, per_tenant, period
from uploads.demo.seeds import (
    ACCOUNT_DAYS,
    ACCOUNTS,
    ENDPOINTS,
    LOG_DAYS,
    LOG_ROWS,
    LOG_SPAN,
    AccountSeed,
    days,
)
from uploads.models import ApiRequestLog, CustomerAccount


def seed_request_logs(now: datetime) -> list[ApiRequestLog]:
    """LOG_ROWS request logs, evenly over the last LOG_SPAN, newest first."""
    step = LOG_SPAN / LOG_ROWS
    rows = []
    for i in range(LOG_ROWS):
        method, path, status = ENDPOINTS[i % len(ENDPOINTS)]
        rows.append(
            ApiRequestLog(
                tenant_id="globex" if i % 3 == 0 else "acme",
                method=method,
                path=path if method != "GET" else f"{path}/{4000 + i}",
                status=status,
                duration_ms=20 + (i * 37) % 400,
                created_at=now - step * (i + 0.5),
            )
        )
    return ApiRequestLog.objects.bulk_create(rows)


def seed_accounts(now: datetime) -> list[tuple[AccountSeed, CustomerAccount]]:
    accounts = []
    for n, seed in enumerate(ACCOUNTS):
        account = CustomerAccount.objects.create(
            tenant_id=seed.tenant_id,
            name=seed.name,
            email=seed.email,
            phone=seed.phone,
            created_at=now - days(400 + 10 * n),
            closed_at=None if seed.closed_age is None else now - seed.closed_age,
        )
        accounts.append((seed, account))
    return accounts


def rows_summary(
    out: Out,
    now: datetime,
    logs: list[ApiRequestLog],
    accounts: list[tuple[AccountSeed, CustomerAccount]],
) -> None:
    out("  Rows of the host's own tables, each a data class:")
    tenants = Counter(log.tenant_id for log in logs)
    old = sum(1 for log in logs if log.created_at <= now - days(LOG_DAYS))
    out(
        f"    {REQUEST_LOGS}: {len(logs)} request logs over the last {period(LOG_SPAN)} "
        f"({per_tenant(tenants)}), {old} older than {LOG_DAYS} days"
    )
    closed = [s.closed_age for s, _ in accounts if s.closed_age is not None]
    long_ago = sum(1 for age in closed if age > days(ACCOUNT_DAYS))
    held = sum(1 for s, _ in accounts if s.held)
    tenants = Counter(s.tenant_id for s, _ in accounts)
    out(
        f"    {CLOSED_ACCOUNTS}: {len(accounts)} customer accounts ({per_tenant(tenants)}): "
        f"{long_ago} closed more than {ACCOUNT_DAYS} days ago ({held} of them held), "
        f"{len(closed) - long_ago} closed since, {len(accounts) - len(closed)} open"
    )
