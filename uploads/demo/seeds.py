"""The demo's seed tables: who writes, which policies, and the uploads, accounts
and request logs of every fate the report then explains."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from retention.models import Disposition
from uploads.apps import CLOSED_ACCOUNTS, REQUEST_LOGS

AUTHOR = "alice"
APPROVER = "bob"
ENFORCED = ("idv.photo", "pod.scan", REQUEST_LOGS, CLOSED_ACCOUNTS)
AUTHORS_GROUP = "Retention authors"
APPROVERS_GROUP = "Retention approvers"
HOLD_REASON = "Litigation 2026-114: globex v. acme"
ACCOUNT_HOLD_REASON = "Chargeback dispute 2026-031"


@dataclass(frozen=True)
class PolicySeed:
    data_class: str
    days: int
    description: str
    locked: bool = False
    safety_margin: timedelta = timedelta(0)
    disposition: str = Disposition.DELETE


LOG_DAYS = 30
ACCOUNT_DAYS = 90

POLICIES = (
    PolicySeed("idv.photo", 30, "Identity verification photos", locked=True),
    PolicySeed("pod.scan", 90, "Proof-of-delivery scans", safety_margin=timedelta(hours=1)),
    PolicySeed("logs.integration", 7, "Integration logs from provider exports"),
    PolicySeed(REQUEST_LOGS, LOG_DAYS, "API request logs"),
    PolicySeed(
        CLOSED_ACCOUNTS,
        ACCOUNT_DAYS,
        "Personal fields of closed customer accounts",
        disposition=Disposition.REDACT,
    ),
)


@dataclass(frozen=True)
class UploadSeed:
    data_class: str
    tenant_id: str
    name: str
    age: timedelta
    renew_age: timedelta | None = None  # renewed this long ago
    remove_file: bool = False  # the file is deleted from storage by hand


def days(n: float) -> timedelta:
    return timedelta(days=n)


UPLOADS = (
    # idv.photo (30 days, locked, enforced after the review)
    UploadSeed("idv.photo", "acme", "passport.jpg", days(45)),  # old generation: deleted
    UploadSeed("idv.photo", "acme", "selfie.jpg", days(45)),
    UploadSeed("idv.photo", "acme", "passport.jpg", days(5)),  # new generation: kept
    UploadSeed("idv.photo", "globex", "driving-licence.jpg", days(45)),
    UploadSeed("idv.photo", "globex", "selfie.jpg", days(40), renew_age=days(2)),
    UploadSeed("idv.photo", "globex", "residence-permit.jpg", days(5)),
    # pod.scan (90 days, safety margin 1 hour, enforced after the review)
    UploadSeed("pod.scan", "globex", "delivery-4711.pdf", days(120)),  # held
    UploadSeed("pod.scan", "globex", "delivery-4712.pdf", days(30)),  # held, not yet due
    UploadSeed("pod.scan", "acme", "delivery-0815.pdf", days(100), remove_file=True),
    UploadSeed("pod.scan", "acme", "delivery-0816.pdf", days(95)),
    UploadSeed("pod.scan", "acme", "delivery-0901.pdf", days(10)),
    # logs.integration (7 days, stays report-only)
    UploadSeed("logs.integration", "acme", "erp-sync-0301.log", days(20)),
    UploadSeed("logs.integration", "globex", "carrier-export-0305.log", days(12)),
    UploadSeed("logs.integration", "acme", "erp-sync-0312.log", days(2)),
)


@dataclass(frozen=True)
class AccountSeed:
    tenant_id: str
    name: str
    phone: str
    closed_age: timedelta | None  # None: the account is open
    held: bool = False

    @property
    def email(self) -> str:
        return f"{self.name.lower().replace(' ', '.')}@{self.tenant_id}.example"


ACCOUNTS = (
    # Closed 120 days ago: past the 90 days, redacted (one under a legal hold).
    AccountSeed("acme", "Ada Lovelace", "+44 20 7946 0101", days(120)),
    AccountSeed("acme", "Alan Turing", "+44 20 7946 0102", days(120)),
    AccountSeed("acme", "Grace Hopper", "+1 202 555 0103", days(120)),
    AccountSeed("acme", "Edsger Dijkstra", "+31 20 555 0104", days(120)),
    AccountSeed("globex", "Barbara Liskov", "+1 617 555 0105", days(120)),
    AccountSeed("globex", "Donald Knuth", "+1 650 555 0106", days(120)),
    AccountSeed("globex", "Frances Allen", "+1 914 555 0107", days(120)),
    AccountSeed("globex", "Ken Thompson", "+1 908 555 0108", days(120), held=True),
    # Closed 30 days ago: kept whole for another 60 days.
    AccountSeed("acme", "Margaret Hamilton", "+1 617 555 0109", days(30)),
    AccountSeed("acme", "John Backus", "+1 212 555 0110", days(30)),
    AccountSeed("acme", "Niklaus Wirth", "+41 44 555 0111", days(30)),
    AccountSeed("globex", "Radia Perlman", "+1 703 555 0112", days(30)),
    AccountSeed("globex", "Leslie Lamport", "+1 650 555 0113", days(30)),
    AccountSeed("globex", "Tony Hoare", "+44 1865 555 0114", days(30)),
    # Open.
    AccountSeed("acme", "Katherine Johnson", "+1 757 555 0115", None),
    AccountSeed("acme", "Dennis Ritchie", "+1 908 555 0116", None),
    AccountSeed("acme", "Hedy Lamarr", "+1 310 555 0117", None),
    AccountSeed("globex", "Claude Shannon", "+1 617 555 0118", None),
    AccountSeed("globex", "Jean Bartik", "+1 816 555 0119", None),
    AccountSeed("globex", "Alan Kay", "+1 818 555 0120", None),
)

# Request logs: evenly over the last LOG_SPAN, newest first; none exactly
# on the 30-day boundary, so the seconds between the steps change nothing.
LOG_ROWS = 300
LOG_SPAN = days(60)
ENDPOINTS = (
    ("GET", "/api/v1/orders", 200),
    ("POST", "/api/v1/orders", 201),
    ("GET", "/api/v1/invoices", 200),
    ("GET", "/api/v1/uploads", 200),
    ("GET", "/api/v1/orders", 404),
    ("DELETE", "/api/v1/sessions", 204),
)

POLICY_AGE = days(180)
HOLD_AGE = days(60)
ACCOUNT_HOLD_AGE = days(10)
