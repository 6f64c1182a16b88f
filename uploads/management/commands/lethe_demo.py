"""The guided demo behind `make demo` (SPEC §4: embedded default, no services).

    lethe_demo seed     users, approved policies, uploads of every fate, a hold
    lethe_demo enable   bob enables enforcement after the reviewed dry run
    lethe_demo report   the fate of every upload, checked against storage

Every step reads the clock once and passes that time to ``retention.api``.
Nothing printed here contains an object key.
"""

from __future__ import annotations

from collections import Counter, defaultdict
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
from django.utils import timezone

from retention import api
from retention.models import (
    DataClassMode,
    DeletionEvent,
    EventOutcome,
    LegalHold,
    Policy,
    PolicyVersion,
    PolicyVersionStatus,
    RecordState,
    RetentionRecord,
)
from uploads.models import Upload
from uploads.services import upload_create

AUTHOR = "alice"
APPROVER = "bob"
ENFORCED = ("idv.photo", "pod.scan")
AUTHORS_GROUP = "Retention authors"
APPROVERS_GROUP = "Retention approvers"
HOLD_REASON = "Litigation 2026-114: globex v. acme"


@dataclass(frozen=True)
class PolicySeed:
    data_class: str
    days: int
    description: str
    locked: bool = False
    safety_margin: timedelta = timedelta(0)


POLICIES = (
    PolicySeed("idv.photo", 30, "Identity verification photos", locked=True),
    PolicySeed("pod.scan", 90, "Proof-of-delivery scans", safety_margin=timedelta(hours=1)),
    PolicySeed("logs.integration", 7, "Integration logs from provider exports"),
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

POLICY_AGE = _days(180)
HOLD_AGE = _days(60)


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


class Command(BaseCommand):
    help = (
        "The Lethe demo: `seed` the example data, `enable` enforcement after the dry run, "
        "`report` what happened to every upload."
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
        for seed in POLICIES:
            version = api.propose_policy_version(
                data_class=seed.data_class,
                retention_period=_days(seed.days),
                author=alice,
                locked=seed.locked,
                safety_margin=seed.safety_margin,
                description=seed.description,
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

        hold = api.place_hold(
            reason=HOLD_REASON,
            placed_by=bob,
            tenant_id="globex",
            data_class="pod.scan",
            now=now - HOLD_AGE,
        )
        renewed = removed = 0
        for seed, upload in uploads:
            if seed.renew_age is not None:
                api.renew(upload.retention_record, now=now - seed.renew_age)
                renewed += 1
            if seed.remove_file:
                storages[upload.storage].delete(upload.object_key)
                removed += 1

        self._print_seed_summary(now, versions, uploads, hold, renewed, removed)

    def _print_seed_summary(
        self,
        now: datetime,
        versions: list[PolicyVersion],
        uploads: list[tuple[UploadSeed, Upload]],
        hold: LegalHold,
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
            mine = [u for _, u in uploads if u.data_class == data_class]
            tenants = Counter(u.tenant_id for u in mine)
            expired = sum(1 for u in mine if records[u.retention_record_id].expires_at <= now)
            per_tenant = ", ".join(f"{t} {n}" for t, n in sorted(tenants.items()))
            out(f"    {data_class}: {len(mine)} ({per_tenant}), {expired} past their deadline")
        out(f"  Renewed after expiry: {renewed} upload(s).")
        out(f"  Legal hold #{hold.pk} on {hold.scope_label}: {hold.reason}")
        out(f"  Files removed from storage by hand (the ledger does not know): {removed}.")

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
        for policy in Policy.objects.order_by("data_class"):
            if policy.mode == DataClassMode.ENFORCE:
                self.stdout.write(f"  {policy.data_class}: enforced (expired records are deleted)")
            else:
                self.stdout.write(
                    f"  {policy.data_class}: stays report-only (expired records are reported, "
                    "never deleted)"
                )

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
        holds = list(LegalHold.objects.active().order_by("pk"))
        events: dict[int, list[DeletionEvent]] = defaultdict(list)
        for event in DeletionEvent.objects.filter(
            record_id__in=[u.retention_record_id for u in uploads]
        ).order_by("id"):
            events[event.record_id].append(event)

        out = self.stdout.write
        modes = []
        for name, policy in sorted(policies.items()):
            version = policy.versions.filter(status=PolicyVersionStatus.APPROVED).first()
            rule = f"v{version.number}, {period(version.retention_period)}" if version else "none"
            if version is not None and version.locked:
                rule += ", locked"
            mode = "enforced" if policy.mode == DataClassMode.ENFORCE else "report-only"
            modes.append(f"{name} {mode} ({rule})")
        out(f"Report at {fmt(now)}. Data classes: {'; '.join(modes)}.")
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

        disagree = self._verify_storage(uploads)
        if disagree:
            for upload, problem in disagree:
                self.stderr.write(f"  upload {upload.pk}: {problem}")
            raise CommandError(
                "storage disagrees with the ledger for upload(s): "
                + ", ".join(str(u.pk) for u, _ in disagree)
            )
        gone = sum(1 for u in uploads if u.retention_record.state == RecordState.DELETED)
        out(
            f"Check: storage agrees with the ledger ({gone} deleted upload(s) have no file, "
            f"the other {len(uploads) - gone} have theirs)."
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
