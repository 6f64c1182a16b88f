"""Are the hosts that run retention's work fit to run it? Read by retention_check.

Two things a promise depends on beyond the data: every worker's clock close
to the database's (only the database's clock decides, but django-q2's ORM
broker and its scheduler compare times on their own host's clock), and the
watchdog schedule installed where queued runs are used (it re-arms runs,
anchors the chain head, resumes stalled Object Lock mirrors).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils.dateparse import parse_datetime
from django_q.models import Schedule

from retention.conf import settings
from retention.models import Run, RunExecutor

# Why the workers fail the check.
CLOCK_SKEW = "clock_skew"  # a host's clock is further than RETENTION_CLOCK_SKEW_SECONDS off
WATCHDOG_MISSING = "watchdog_missing"  # queued runs are used and the watchdog is not installed

# The watchdog's schedule, as ``retention_schedule`` installs it.
WATCHDOG_SCHEDULE = "retention.watchdog"
SWEEP_SCHEDULE = "retention.sweep"

# Hosts and queued runs seen within this window count.
RECENT = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class HostClockSeen:
    """The latest offset a host reported (host minus database), and in which run."""

    host: str
    offset_seconds: float
    seen_at: datetime
    run_id: str

    def skewed(self, limit: float) -> bool:
        return abs(self.offset_seconds) > limit


@dataclass(frozen=True, slots=True)
class WorkersCheck:
    now: datetime
    clock_skew_limit: float
    hosts: tuple[HostClockSeen, ...]
    watchdog_installed: bool
    queued_runs_recent: bool

    @property
    def broken(self) -> tuple[str, ...]:
        reasons = []
        if any(h.skewed(self.clock_skew_limit) for h in self.hosts):
            reasons.append(CLOCK_SKEW)
        if self.queued_runs_recent and not self.watchdog_installed:
            reasons.append(WATCHDOG_MISSING)
        return tuple(reasons)

    @property
    def ok(self) -> bool:
        return not self.broken


def host_clocks_seen(*, now: datetime) -> tuple[HostClockSeen, ...]:
    """Each host's latest reported offset, from the runs started within ``RECENT``."""
    latest: dict[str, HostClockSeen] = {}
    reports = Run.objects.filter(started_at__gte=now - RECENT).values_list("pk", "report")
    for run_id, report in reports:
        clocks: dict[str, Any] = (report or {}).get("host_clocks") or {}
        for host, seen in clocks.items():
            at = parse_datetime(str(seen.get("at", "")))
            if at is None:
                continue
            if host not in latest or at > latest[host].seen_at:
                latest[host] = HostClockSeen(host, float(seen["offset_seconds"]), at, str(run_id))
    return tuple(sorted(latest.values(), key=lambda h: h.host))


def watchdog_installed() -> bool:
    return bool(Schedule.objects.filter(name=WATCHDOG_SCHEDULE).exists())


def workers_check(*, now: datetime) -> WorkersCheck:
    queued = Run.objects.filter(executor=RunExecutor.QUEUE, started_at__gte=now - RECENT).exists()
    sweep = bool(Schedule.objects.filter(name=SWEEP_SCHEDULE).exists())
    return WorkersCheck(
        now=now,
        clock_skew_limit=settings.CLOCK_SKEW_SECONDS,
        hosts=host_clocks_seen(now=now),
        watchdog_installed=watchdog_installed(),
        queued_runs_recent=queued or sweep,
    )


def workers_check_as_json(check: WorkersCheck) -> dict[str, Any]:
    """The ``workers`` part of ``retention_check --json``."""
    return {
        "ok": check.ok,
        "broken": list(check.broken),
        "clock_skew_limit_seconds": check.clock_skew_limit,
        "hosts": [
            {
                "host": h.host,
                "offset_seconds": h.offset_seconds,
                "seen_at": h.seen_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
                "run_id": h.run_id,
                "skewed": h.skewed(check.clock_skew_limit),
            }
            for h in check.hosts
        ],
        "watchdog_installed": check.watchdog_installed,
        "queued_runs_recent": check.queued_runs_recent,
    }
