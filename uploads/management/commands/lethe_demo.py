"""The guided demo behind `make demo` (SPEC §4: embedded default, no services).

    lethe_demo seed     users, approved policies, uploads of every fate, request
                        logs, customer accounts, holds
    lethe_demo enable   bob enables enforcement after the reviewed dry run
    lethe_demo report   the fate of every upload, request log and account,
                        checked against storage and the database

Every step reads the clock once and passes that time to ``retention.api``.
Nothing printed here contains an object key.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import F
from django.utils import timezone

from retention import api
from retention.engine.rules import run_rules
from retention.models import (
    DataClassMode,
    DeletionEvent,
    Disposition,
    EventOutcome,
    LegalHold,
    Policy,
    PolicyVersion,
    PolicyVersionStatus,
    RecordState,
    RetentionRecord,
    Run,
    RunMode,
    RunStatus,
)
from retention.rows.registry import RowClass, row_class
from retention.selectors.holds import held_rows
from uploads.apps import CLOSED_ACCOUNTS, REDACTED_NAME, REQUEST_LOGS
from uploads.models import ApiRequestLog, CustomerAccount, Upload
from uploads.services import upload_create

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


def _days(n: float) -> timedelta:
    return timedelta(days=n)


UPLOADS = (
    # idv.photo (30 days, locked, enforced after the review)
    UploadSeed("idv.photo", "acme", "passport.jpg", _days(45)),  # old generation: deleted
    UploadSeed("idv.photo", "acme", "selfie.jpg", _days(45)),
    UploadSeed("idv.photo", "acme", "passport.jpg", _days(5)),  # new generation: kept
    UploadSeed("idv.photo", "globex", "driving-licence.jpg", _days(45)),
    UploadSeed("idv.photo", "globex", "selfie.jpg", _days(40), renew_age=_days(2)),
    UploadSeed("idv.photo", "globex", "residence-permit.jpg", _days(5)),
    # pod.scan (90 days, safety margin 1 hour, enforced after the review)
    UploadSeed("pod.scan", "globex", "delivery-4711.pdf", _days(120)),  # held
    UploadSeed("pod.scan", "globex", "delivery-4712.pdf", _days(30)),  # held, not yet due
    UploadSeed("pod.scan", "acme", "delivery-0815.pdf", _days(100), remove_file=True),
    UploadSeed("pod.scan", "acme", "delivery-0816.pdf", _days(95)),
    UploadSeed("pod.scan", "acme", "delivery-0901.pdf", _days(10)),
    # logs.integration (7 days, stays report-only)
    UploadSeed("logs.integration", "acme", "erp-sync-0301.log", _days(20)),
    UploadSeed("logs.integration", "globex", "carrier-export-0305.log", _days(12)),
    UploadSeed("logs.integration", "acme", "erp-sync-0312.log", _days(2)),
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
    AccountSeed("acme", "Ada Lovelace", "+44 20 7946 0101", _days(120)),
    AccountSeed("acme", "Alan Turing", "+44 20 7946 0102", _days(120)),
    AccountSeed("acme", "Grace Hopper", "+1 202 555 0103", _days(120)),
    AccountSeed("acme", "Edsger Dijkstra", "+31 20 555 0104", _days(120)),
    AccountSeed("globex", "Barbara Liskov", "+1 617 555 0105", _days(120)),
    AccountSeed("globex", "Donald Knuth", "+1 650 555 0106", _days(120)),
    AccountSeed("globex", "Frances Allen", "+1 914 555 0107", _days(120)),
    AccountSeed("globex", "Ken Thompson", "+1 908 555 0108", _days(120), held=True),
    # Closed 30 days ago: kept whole for another 60 days.
    AccountSeed("acme", "Margaret Hamilton", "+1 617 555 0109", _days(30)),
    AccountSeed("acme", "John Backus", "+1 212 555 0110", _days(30)),
    AccountSeed("acme", "Niklaus Wirth", "+41 44 555 0111", _days(30)),
    AccountSeed("globex", "Radia Perlman", "+1 703 555 0112", _days(30)),
    AccountSeed("globex", "Leslie Lamport", "+1 650 555 0113", _days(30)),
    AccountSeed("globex", "Tony Hoare", "+44 1865 555 0114", _days(30)),
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
LOG_SPAN = _days(60)
ENDPOINTS = (
    ("GET", "/api/v1/orders", 200),
    ("POST", "/api/v1/orders", 201),
    ("GET", "/api/v1/invoices", 200),
    ("GET", "/api/v1/uploads", 200),
    ("GET", "/api/v1/orders", 404),
    ("DELETE", "/api/v1/sessions", 204),
)

POLICY_AGE = _days(180)
HOLD_AGE = _days(60)
ACCOUNT_HOLD_AGE = _days(10)


def fmt(value: datetime | None) -> str:
    if value is None:
        return "-"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def span(delta: timedelta) -> str:
    """A human length: '25 days', '1 day', '6 hours', '1 hour'."""
    seconds = max(delta.total_seconds(), 0)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = round(seconds / size)
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return "less than a minute"


def period(delta: timedelta) -> str:
    if delta % timedelta(days=1) == timedelta(0):
        days = delta.days
        return f"{days} day{'' if days == 1 else 's'}"
    return span(delta)


def _and(words: list[str]) -> str:
    """'name, email and phone'."""
    if len(words) < 2:
        return "".join(words)
    return f"{', '.join(words[:-1])} and {words[-1]}"


def _per_tenant(counts: Counter[str]) -> str:
    return ", ".join(f"{t} {n}" for t, n in sorted(counts.items()))


def _row_rule(row: RowClass, version: PolicyVersion) -> str:
    """How a version disposes of a class of model rows, for a person."""
    what = f"rows of {row.label} by {row.time_field}"
    if version.disposition == Disposition.REDACT:
        return f"{what}, then {_and(list(row.redact))} redacted"
    return f"{what}, then deleted"


def _reviewed(policy: Policy, row: RowClass) -> str:
    """What the reviewed dry run showed of a class of model rows."""
    run = policy.reviewed_dry_run
    figures = run.report.get("per_data_class", {}).get(policy.data_class, {}) if run else {}
    if figures.get("kind") != "rows":
        return f"rows of {row.label} past their period are disposed of"
    if figures["disposition"] == Disposition.REDACT:
        text = (
            f"rows of {figures['model']} past their period are redacted; the dry run: "
            f"{figures['eligible']} to redact"
        )
    else:
        text = (
            f"rows of {figures['model']} past their period are deleted; the dry run: "
            f"{figures['eligible']} to delete"
        )
    text += f", {figures['held']} under legal hold"
    if figures["protected"]:
        text += f", {figures['protected']} kept by a PROTECT relation"
    related = figures.get("related")
    if related is not None:
        taken = [f"{n} {m}" for m, n in related["deletes"].items()]
        taken += [f"{n} {m} set to NULL" for m, n in related["nulls"].items()]
        text += f", taking {', '.join(taken) if taken else 'no related row'} with them"
    return text


@dataclass(frozen=True)
class DemoCheck:
    """One check of the report: the line when it holds, the error and details when not."""

    agrees: str
    disagrees: str
    problems: list[str]


def _version(policy: Policy) -> PolicyVersion | None:
    return policy.versions.filter(status=PolicyVersionStatus.APPROVED).first()


def _mode(policy: Policy) -> str:
    """'enforced (v1, 30 days, locked)': the mode and the version in force."""
    version = _version(policy)
    if version is None:
        rule = "no version in force"
    else:
        rule = f"v{version.number}, {period(version.retention_period)}"
        if version.locked:
            rule += ", locked"
        row = row_class(policy.data_class)
        if row is not None:
            rule += f", {_row_rule(row, version)}"
    mode = "enforced" if policy.mode == DataClassMode.ENFORCE else "report-only"
    return f"{mode} ({rule})"


def _registration(data_class: str) -> RowClass:
    row = row_class(data_class)
    if row is None:
        raise CommandError(f"{data_class} is not registered: see UploadsConfig.ready().")
    return row


def _last_enforced(data_class: str) -> tuple[Run | None, datetime | None]:
    """The newest finished enforce run over a class of model rows, and its cutoff for them.

    Every row at or before that cutoff was disposed of by that run, unless held;
    the report's own clock would move the line by the seconds since.
    """
    runs = Run.objects.filter(mode=RunMode.ENFORCE, status=RunStatus.FINISHED)
    for run in runs.order_by("-started_at"):
        if data_class in run.data_classes:
            return run, run_rules(run)[data_class].row_cutoff
    return None, None


def _masked(value: str) -> bool:
    """True when Mask(keep_last=2) has been over the value."""
    hidden = value[:-2] if len(value) > 2 else value
    return not value or set(hidden) == {"*"}


def _row_hold(holds: Sequence[LegalHold], label: str, pk: object, tenant: str) -> LegalHold | None:
    """The hold to name for a held row: its own first, else its tenant's or class's.

    Whether a row is held is ``held_rows``'s answer; this only picks a name.
    """
    own = [h for h in holds if h.subject_type == label and h.subject_pk == str(pk)]
    broad = [h for h in holds if h.subject_pk is None and h.tenant_id in (None, "", tenant)]
    return (own + broad)[0] if own or broad else None


def _account_kept(
    account: CustomerAccount,
    now: datetime,
    keep: timedelta,
    held: bool,
    holds: Sequence[LegalHold],
    policy: Policy,
) -> tuple[str, str]:
    """Why an account was not redacted: (kind, text)."""
    closed = account.closed_at
    hold = _row_hold(holds, account._meta.label, account.pk, account.tenant_id) if held else None
    hold_text = f"legal hold #{hold.pk} ({hold.reason})" if hold else "a legal hold"
    if closed is None:
        fate = "kept: the account is open"
        return "open", fate + (f"; {hold_text} also applies" if held else "")
    if closed + keep > now:
        fate = (
            f"kept: closed {span(now - closed)} ago, redacted in "
            f"{span(closed + keep - now)} ({fmt(closed + keep)})"
        )
        return "recent", fate + (f"; {hold_text} also applies" if held else "")
    if held:
        return "held", f"kept: under {hold_text}"
    if policy.mode != DataClassMode.ENFORCE:
        return "due", f"kept: data class {policy.data_class} is report-only"
    return "due", f"kept: closed {fmt(closed)}, due at the next enforce run"


class Command(BaseCommand):
    help = (
        "The Lethe demo: `seed` the example data, `enable` enforcement after the dry run, "
        "`report` what happened to every upload, request log and customer account."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("step", choices=("seed", "enable", "report"))

    def handle(self, *, step: str, **options: Any) -> None:
        now = timezone.now()
        getattr(self, f"_{step}")(now)

    # ------------------------------------------------------------------ seed

    def _seed(self, now: datetime) -> None:
        user_model = get_user_model()
        existing = [
            label
            for label, present in (
                ("users alice/bob", user_model.objects.filter(username__in=[AUTHOR, APPROVER])),
                ("policies", Policy.objects.all()),
                ("retention records", RetentionRecord.objects.all()),
                ("uploads", Upload.objects.all()),
                ("request logs", ApiRequestLog.objects.all()),
                ("customer accounts", CustomerAccount.objects.all()),
                ("legal holds", LegalHold.objects.all()),
            )
            if present.exists()
        ]
        if existing:
            raise CommandError(
                f"The database already holds demo data ({', '.join(existing)}); refusing to "
                "seed twice. Start from an empty database (`make demo` wipes var/demo first)."
            )

        alice = user_model.objects.create_user(AUTHOR, f"{AUTHOR}@example.com", is_staff=True)
        bob = user_model.objects.create_user(APPROVER, f"{APPROVER}@example.com", is_staff=True)
        # Each demo user gets exactly their governance role's permissions.
        call_command("retention_setup_groups", stdout=StringIO())
        alice.groups.add(Group.objects.get(name=AUTHORS_GROUP))
        bob.groups.add(Group.objects.get(name=APPROVERS_GROUP))
        bob = user_model.objects.get(pk=bob.pk)  # has_perm caches permissions

        written = now - POLICY_AGE
        versions: list[PolicyVersion] = []
        for policy_seed in POLICIES:
            version = api.propose_policy_version(
                data_class=policy_seed.data_class,
                retention_period=_days(policy_seed.days),
                author=alice,
                locked=policy_seed.locked,
                safety_margin=policy_seed.safety_margin,
                disposition=policy_seed.disposition,
                description=policy_seed.description,
                owner="Data Protection Office",
                now=written,
            )
            api.submit_policy_version(version, by=alice, now=written + timedelta(hours=1))
            version = api.approve_policy_version(
                version, approver=bob, now=written + timedelta(days=1)
            )
            versions.append(version)

        uploads: list[tuple[UploadSeed, Upload]] = []
        for seed in sorted(UPLOADS, key=lambda s: -s.age):
            created = now - seed.age
            body = f"demo {seed.data_class} for {seed.tenant_id}, written {fmt(created)}\n"
            upload = upload_create(
                tenant_id=seed.tenant_id,
                data_class=seed.data_class,
                file=ContentFile(body.encode(), name=seed.name),
                now=created,
            )
            uploads.append((seed, upload))

        logs = self._seed_request_logs(now)
        accounts = self._seed_accounts(now)

        holds = [
            api.place_hold(
                reason=HOLD_REASON,
                placed_by=bob,
                tenant_id="globex",
                data_class="pod.scan",
                now=now - HOLD_AGE,
            )
        ]
        holds += [
            api.place_hold(
                reason=ACCOUNT_HOLD_REASON,
                placed_by=bob,
                subject=account,
                now=now - ACCOUNT_HOLD_AGE,
            )
            for seed, account in accounts
            if seed.held
        ]
        renewed = removed = 0
        for seed, upload in uploads:
            if seed.renew_age is not None:
                api.renew(upload.retention_record, now=now - seed.renew_age)
                renewed += 1
            if seed.remove_file:
                storages[upload.storage].delete(upload.object_key)
                removed += 1

        self._print_seed_summary(now, versions, uploads, holds, renewed, removed)
        self._print_rows_summary(now, logs, accounts)

    def _seed_request_logs(self, now: datetime) -> list[ApiRequestLog]:
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

    def _seed_accounts(self, now: datetime) -> list[tuple[AccountSeed, CustomerAccount]]:
        accounts = []
        for n, seed in enumerate(ACCOUNTS):
            account = CustomerAccount.objects.create(
                tenant_id=seed.tenant_id,
                name=seed.name,
                email=seed.email,
                phone=seed.phone,
                created_at=now - _days(400 + 10 * n),
                closed_at=None if seed.closed_age is None else now - seed.closed_age,
            )
            accounts.append((seed, account))
        return accounts

    def _print_seed_summary(
        self,
        now: datetime,
        versions: list[PolicyVersion],
        uploads: list[tuple[UploadSeed, Upload]],
        holds: list[LegalHold],
        renewed: int,
        removed: int,
    ) -> None:
        out = self.stdout.write
        out(f"Seeded the Lethe demo (reference time {fmt(now)}).")
        out(
            f"  Users: {AUTHOR} ({AUTHORS_GROUP}, writes policies), "
            f"{APPROVER} ({APPROVERS_GROUP}, approves them)."
        )
        out(f"  Policies, each proposed by {AUTHOR} and approved by {APPROVER}; all report-only:")
        for version in versions:
            rules = [f"keep {period(version.retention_period)}"]
            if version.safety_margin:
                rules.append(f"safety margin {span(version.safety_margin)}")
            if version.locked:
                rules.append("locked (can only be lengthened)")
            row = row_class(version.policy.data_class)
            if row is not None:
                rules.append(_row_rule(row, version))
            out(f"    {version.policy.data_class} v{version.number}: {', '.join(rules)}")
        out("  Uploads:")
        records = {
            r.pk: r
            for r in RetentionRecord.objects.filter(
                pk__in=[u.retention_record_id for _, u in uploads]
            )
        }
        for version in versions:
            data_class = version.policy.data_class
            if row_class(data_class) is not None:
                continue
            mine = [u for _, u in uploads if u.data_class == data_class]
            tenants = Counter(u.tenant_id for u in mine)
            expired = sum(1 for u in mine if records[u.retention_record_id].expires_at <= now)
            per_tenant = ", ".join(f"{t} {n}" for t, n in sorted(tenants.items()))
            out(f"    {data_class}: {len(mine)} ({per_tenant}), {expired} past their deadline")
        out(f"  Renewed after expiry: {renewed} upload(s).")
        for hold in holds:
            out(f"  Legal hold #{hold.pk} on {hold.scope_label}: {hold.reason}")
        out(f"  Files removed from storage by hand (the ledger does not know): {removed}.")

    def _print_rows_summary(
        self,
        now: datetime,
        logs: list[ApiRequestLog],
        accounts: list[tuple[AccountSeed, CustomerAccount]],
    ) -> None:
        out = self.stdout.write
        out("  Rows of the host's own tables, each a data class:")
        tenants = Counter(log.tenant_id for log in logs)
        old = sum(1 for log in logs if log.created_at <= now - _days(LOG_DAYS))
        out(
            f"    {REQUEST_LOGS}: {len(logs)} request logs over the last {period(LOG_SPAN)} "
            f"({_per_tenant(tenants)}), {old} older than {LOG_DAYS} days"
        )
        closed = [s.closed_age for s, _ in accounts if s.closed_age is not None]
        long_ago = sum(1 for age in closed if age > _days(ACCOUNT_DAYS))
        held = sum(1 for s, _ in accounts if s.held)
        tenants = Counter(s.tenant_id for s, _ in accounts)
        out(
            f"    {CLOSED_ACCOUNTS}: {len(accounts)} customer accounts ({_per_tenant(tenants)}): "
            f"{long_ago} closed more than {ACCOUNT_DAYS} days ago ({held} of them held), "
            f"{len(closed) - long_ago} closed since, {len(accounts) - len(closed)} open"
        )

    # ---------------------------------------------------------------- enable

    def _enable(self, now: datetime) -> None:
        user_model = get_user_model()
        try:
            bob = user_model.objects.get(username=APPROVER)
        except user_model.DoesNotExist:
            raise CommandError("No demo data: run `manage.py lethe_demo seed` first.") from None
        policies = []
        for data_class in ENFORCED:
            try:
                policies.append(api.enable_enforcement(data_class, by=bob, now=now))
            except api.RetentionError as exc:
                raise CommandError(f"Cannot enable enforcement for {data_class}: {exc}") from exc
        runs = sorted({str(p.reviewed_dry_run_id) for p in policies})
        self.stdout.write(f"{APPROVER} reviewed dry run {', '.join(runs)} and enabled enforcement.")
        for policy in Policy.objects.select_related("reviewed_dry_run").order_by("data_class"):
            row = row_class(policy.data_class)
            if policy.mode != DataClassMode.ENFORCE:
                self.stdout.write(
                    f"  {policy.data_class}: stays report-only (expired records are reported, "
                    "never deleted)"
                )
            elif row is None:
                self.stdout.write(f"  {policy.data_class}: enforced (expired records are deleted)")
            else:
                self.stdout.write(f"  {policy.data_class}: enforced ({_reviewed(policy, row)})")

    # ---------------------------------------------------------------- report

    def _report(self, now: datetime) -> None:
        uploads = list(
            Upload.objects.select_related("retention_record__policy_version__policy").order_by(
                "data_class", "tenant_id", "created_at", "original_name"
            )
        )
        if not uploads:
            raise CommandError("No uploads: run `manage.py lethe_demo seed` first.")
        policies = {p.data_class: p for p in Policy.objects.all()}
        missing = [name for name in (REQUEST_LOGS, CLOSED_ACCOUNTS) if name not in policies]
        if missing:
            raise CommandError(
                f"No policy for {', '.join(missing)}: the demo data predates them; "
                "start from an empty database and seed again."
            )
        holds = list(LegalHold.objects.active().order_by("pk"))
        events: dict[int, list[DeletionEvent]] = defaultdict(list)
        for event in DeletionEvent.objects.filter(
            record_id__in=[u.retention_record_id for u in uploads]
        ).order_by("id"):
            if event.record_id is not None:
                events[event.record_id].append(event)

        out = self.stdout.write
        out(f"Report at {fmt(now)}. Data classes:")
        for name, policy in sorted(policies.items()):
            out(f"  {name}: {_mode(policy)}")
        out("Uploads (tracked files):")
        width = max(len(u.original_name) for u in uploads)
        totals: Counter[str] = Counter()
        for upload in uploads:
            kind, fate = self._fate(upload, now, policies, holds, events)
            totals[kind] += 1
            out(
                f"  {upload.original_name:<{width}}  {upload.tenant_id:<7} "
                f"{upload.data_class:<17} uploaded {upload.created_at:%Y-%m-%d}  {fate}"
            )
        line = (
            f"Totals: deleted {totals['deleted']}, already absent {totals['absent']}, "
            f"kept {totals['kept']}"
        )
        for kind, label in (("failed", "failed"), ("in_flight", "being deleted")):
            if totals[kind]:
                line += f", {label} {totals[kind]}"
        out(line + ".")

        checks = [
            self._storage_check(uploads),
            self._report_request_logs(now, policies[REQUEST_LOGS]),
            self._report_accounts(now, policies[CLOSED_ACCOUNTS]),
        ]
        failed = [check for check in checks if check.problems]
        for check in checks:
            if not check.problems:
                out(f"Check: {check.agrees}")
        for check in failed:
            for problem in check.problems:
                self.stderr.write(f"  {problem}")
        if failed:
            raise CommandError("; ".join(check.disagrees for check in failed))

    def _storage_check(self, uploads: list[Upload]) -> DemoCheck:
        disagree = self._verify_storage(uploads)
        gone = sum(1 for u in uploads if u.retention_record.state == RecordState.DELETED)
        return DemoCheck(
            agrees=(
                f"storage agrees with the ledger ({gone} deleted upload(s) have no file, "
                f"the other {len(uploads) - gone} have theirs)."
            ),
            disagrees=(
                "storage disagrees with the ledger for upload(s): "
                + ", ".join(str(u.pk) for u, _ in disagree)
            ),
            problems=[f"upload {upload.pk}: {problem}" for upload, problem in disagree],
        )

    def _report_request_logs(self, now: datetime, policy: Policy) -> DemoCheck:
        """What was deleted of the request logs and what is kept; no old row may remain."""
        row = _registration(REQUEST_LOGS)
        run, cutoff = _last_enforced(REQUEST_LOGS)
        version = _version(policy)
        keep = version.retention_period if version else timedelta(0)
        holds = held_rows(REQUEST_LOGS, label=row.label, tenant_field=row.tenant_field)
        out = self.stdout.write
        out(f"Request logs, data class {REQUEST_LOGS}: {_mode(policy)}")

        deleted: Counter[str] = Counter()
        pages = 0
        for event in DeletionEvent.objects.filter(
            data_class=REQUEST_LOGS, outcome=EventOutcome.DELETED
        ):
            deleted[event.tenant_id] += event.row_count or 1
            pages += 1
        if run is None or cutoff is None:
            out("  Deleted nothing: no enforce run has covered the class yet.")
        else:
            out(
                f"  Deleted {deleted.total()} row(s) created at or before {fmt(cutoff)}, the "
                f"cutoff of run {run.pk} ({_per_tenant(deleted) or 'none'}); "
                f"evidence: {pages} event(s), one per page and tenant."
            )

        kinds: dict[str, list[tuple[int, str, datetime]]] = defaultdict(list)
        for pk, tenant, created in ApiRequestLog.objects.order_by("created_at", "pk").values_list(
            "pk", "tenant_id", "created_at"
        ):
            if holds.covers(pk, tenant):
                kind = "held"
            elif cutoff is not None and created <= cutoff:
                kind = "stale"
            elif created <= now - keep:
                kind = "due"
            else:
                kind = "young"
            kinds[kind].append((pk, tenant, created))
        kept = sum(len(rows) for rows in kinds.values())
        if kinds["young"]:
            young = kinds["young"]
            tenants = Counter(t for _, t, _ in young)
            out(
                f"  Kept {len(young)} row(s) ({_per_tenant(tenants)}) created "
                f"{young[0][2]:%Y-%m-%d} to {young[-1][2]:%Y-%m-%d}: younger than "
                f"{period(keep)}; the oldest is due {fmt(young[0][2] + keep)}."
            )
        if kinds["held"]:
            out(f"  Kept {len(kinds['held'])} row(s) under legal hold.")
        if kinds["due"]:
            why = (
                "due at the next enforce run"
                if policy.mode == DataClassMode.ENFORCE
                else "the class is report-only"
            )
            out(f"  Kept {len(kinds['due'])} row(s) older than {period(keep)}: {why}.")

        problems = []
        if kinds["stale"]:
            assert run is not None and cutoff is not None
            problems.append(
                f"{len(kinds['stale'])} request log(s) created at or before the cutoff "
                f"{fmt(cutoff)} of run {run.pk} remain, under no hold: ids "
                + ", ".join(str(pk) for pk, _, _ in kinds["stale"][:10])
            )
        if deleted.total() + kept != LOG_ROWS:
            problems.append(
                f"{LOG_ROWS} request logs were seeded, {deleted.total()} deleted with evidence "
                f"and {kept} are left: {LOG_ROWS - deleted.total() - kept:+d} unaccounted for"
            )
        when = f"at or before the cutoff {fmt(cutoff)} " if cutoff else ""
        return DemoCheck(
            agrees=(
                f"no request log created {when}remains; {deleted.total()} deleted, each in "
                f"the evidence, and {kept} kept make the {LOG_ROWS} seeded."
            ),
            disagrees=f"the request logs ({REQUEST_LOGS}) disagree with the run",
            problems=problems,
        )

    def _report_accounts(self, now: datetime, policy: Policy) -> DemoCheck:
        """The fate of every customer account; closed ones past the cutoff must be redacted."""
        row = _registration(CLOSED_ACCOUNTS)
        run, cutoff = _last_enforced(CLOSED_ACCOUNTS)
        version = _version(policy)
        keep = version.retention_period if version else timedelta(0)
        holds = held_rows(CLOSED_ACCOUNTS, label=row.label, tenant_field=row.tenant_field)
        hold_list = list(LegalHold.objects.rows_covering(CLOSED_ACCOUNTS).order_by("pk"))
        seeds = {seed.email: seed for seed in ACCOUNTS}
        accounts = list(
            CustomerAccount.objects.order_by(F("closed_at").asc(nulls_last=True), "tenant_id", "pk")
        )
        out = self.stdout.write
        out(f"Customer accounts, data class {CLOSED_ACCOUNTS}: {_mode(policy)}")

        width = max((len(a.name) for a in accounts), default=0)
        totals: Counter[str] = Counter()
        problems = []
        for account in accounts:
            closed = account.closed_at
            due = cutoff is not None and closed is not None and closed <= cutoff
            held = holds.covers(account.pk, account.tenant_id)
            if due and not held:
                assert closed is not None
                left = [
                    name
                    for name, done in (
                        ("name", account.name == REDACTED_NAME),
                        ("email", "@" not in account.email),
                        ("phone", _masked(account.phone)),
                    )
                    if not done
                ]
                if left:
                    kind, fate = "missed", f"NOT redacted: its {_and(left)} still as written"
                    problems.append(
                        f"account {account.pk} ({account.tenant_id}): closed {fmt(closed)}, "
                        f"before the cutoff {fmt(cutoff)}, but its {_and(left)} "
                        f"{'is' if len(left) == 1 else 'are'} not redacted"
                    )
                else:
                    kind = "redacted"
                    fate = (
                        f"redacted (closed {span(now - closed)} ago): "
                        f"email {account.email[:12]}..., phone {account.phone}"
                    )
            else:
                kind, fate = _account_kept(account, now, keep, held, hold_list, policy)
                seed = seeds.get(account.email)
                if seed is None or (account.name, account.phone) != (seed.name, seed.phone):
                    problems.append(
                        f"account {account.pk} ({account.tenant_id}): {fate}, "
                        "but it is not as seeded"
                    )
            totals[kind] += 1
            when = f"closed {closed:%Y-%m-%d}" if closed is not None else "open"
            out(f"  {account.name:<{width}}  {account.tenant_id:<7} {when:<17}  {fate}")

        evidence = sum(
            event.row_count or 1
            for event in DeletionEvent.objects.filter(
                data_class=CLOSED_ACCOUNTS, outcome=EventOutcome.REDACTED
            )
        )
        kept = len(accounts) - totals["redacted"]
        details = [
            f"{label} {totals[kind]}"
            for kind, label in (
                ("missed", "NOT redacted though due"),
                ("held", "under legal hold"),
                ("recent", f"closed less than {period(keep)} ago"),
                ("due", f"closed more than {period(keep)} ago, not yet redacted"),
                ("open", "open"),
            )
            if totals[kind]
        ]
        out(
            f"Totals: redacted {totals['redacted']}, kept {kept} ({', '.join(details)}); "
            f"{evidence} redaction event(s) in the evidence."
        )
        if evidence != totals["redacted"]:
            problems.append(
                f"{totals['redacted']} account(s) are redacted, "
                f"but the evidence records {evidence} redaction(s)"
            )
        if len(accounts) != len(ACCOUNTS):
            problems.append(
                f"{len(ACCOUNTS)} accounts were seeded and {len(accounts)} are left: "
                "redaction deletes no row"
            )
        when = f"at or before the cutoff {fmt(cutoff)} " if cutoff else ""
        return DemoCheck(
            agrees=(
                f"the {totals['redacted']} account(s) closed {when}and under no hold are "
                f'redacted (name "{REDACTED_NAME}", no "@" in the email, the phone masked), '
                f"each with its event; the other {kept} are as seeded."
            ),
            disagrees=f"the customer accounts ({CLOSED_ACCOUNTS}) disagree with the run",
            problems=problems,
        )

    def _fate(
        self,
        upload: Upload,
        now: datetime,
        policies: dict[str, Policy],
        holds: list[LegalHold],
        events: dict[int, list[DeletionEvent]],
    ) -> tuple[str, str]:
        record = upload.retention_record
        if record.state == RecordState.DELETED:
            final = [
                e
                for e in events[record.pk]
                if e.outcome in (EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT)
            ]
            if not final:
                return "deleted", f"deleted at {fmt(record.deleted_at)} (no receipt found)"
            event = final[-1]
            detail = (
                f"(expired {fmt(event.expires_at)}, "
                f"policy {event.policy_key} v{event.policy_version_number})"
            )
            if event.outcome == EventOutcome.ALREADY_ABSENT:
                return "absent", f"already absent, recorded at {fmt(event.occurred_at)} {detail}"
            return "deleted", f"deleted at {fmt(event.occurred_at)} {detail}"
        if record.state == RecordState.FAILED:
            reason = record.last_error or "no reason recorded"
            if record.retryable and record.next_attempt_at:
                reason += f" (retry due {fmt(record.next_attempt_at)})"
            return "failed", f"failed: {reason}"
        if record.state == RecordState.DELETING:
            return "in_flight", f"being deleted (claimed until {fmt(record.lease_expires_at)})"

        hold = (
            LegalHold.objects.covering(
                tenant_id=record.tenant_id, data_class=record.data_class, record_id=record.pk
            )
            .order_by("pk")
            .first()
            if holds
            else None
        )
        if record.expires_at > now:
            if record.renewed_at is not None:
                fate = (
                    f"kept: renewed on {fmt(record.renewed_at)}, "
                    f"now expires {fmt(record.expires_at)}"
                )
            else:
                fate = (
                    f"kept: expires in {span(record.expires_at - now)} ({fmt(record.expires_at)})"
                )
            if hold is not None:
                fate += f"; legal hold #{hold.pk} also applies"
            return "kept", fate
        if hold is not None:
            return "kept", f"kept: under legal hold #{hold.pk} ({hold.reason})"
        policy = policies.get(record.data_class)
        if policy is None or policy.mode != DataClassMode.ENFORCE:
            return "kept", f"kept: data class {record.data_class} is report-only"
        return "kept", (f"kept: expired {fmt(record.expires_at)}, due at the next enforce run")

    def _verify_storage(self, uploads: list[Upload]) -> list[tuple[Upload, str]]:
        problems = []
        for upload in uploads:
            record = upload.retention_record
            present = storages[record.storage].exists(record.object_key)
            if record.state == RecordState.DELETED and present:
                problems.append((upload, "the ledger says deleted, but its file still exists"))
            elif record.state == RecordState.DELETING and record.disposal_started_at:
                continue  # mid-disposal: either answer is possible
            elif record.state != RecordState.DELETED and not present:
                problems.append(
                    (upload, f"the ledger says {record.state}, but its file is missing")
                )
        return problems
