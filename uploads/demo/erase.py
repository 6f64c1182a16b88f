"""The erasure steps: a customer asks to be forgotten, a tenant's contract ends.

``request`` files both as alice and approves them as bob (four eyes):
Dennis Ritchie's erasure (his account, redacted, and the two photos he
uploaded today, deleted though far from expiring) and globex's offboarding
(everything of the tenant, where the litigation hold on its delivery scans
and the chargeback hold on one account keep what they cover). ``run_retention
--erasures`` executes them; ``certificates`` prints each certificate's
summary and writes it to a file for the offline check.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.management.base import CommandError

from retention import api
from retention.models import ErasureRequest
from uploads.demo.formatting import Out, and_list, fmt
from uploads.demo.seeds import APPROVER, AUTHOR
from uploads.models import CustomerAccount
from uploads.services import upload_create

SUBJECT = "Dennis Ritchie"
OFFBOARDED = "globex"


def request(out: Out, now: datetime) -> None:
    users = get_user_model().objects
    try:
        alice, bob = users.get(username=AUTHOR), users.get(username=APPROVER)
    except users.model.DoesNotExist:
        raise CommandError("No demo data: run `manage.py lethe_demo seed` first.") from None
    account = CustomerAccount.objects.get(name=SUBJECT)
    for name in ("passport.jpg", "selfie.jpg"):
        upload_create(
            tenant_id=account.tenant_id,
            data_class="idv.photo",
            file=ContentFile(b"demo photo", name=name),
            subject_id=account.pk,
            now=now,
        )
    out(f"{SUBJECT} (account {account.pk}, {account.tenant_id}) uploaded two photos today.")
    filed = [
        api.request_erasure(
            requested_by=alice,
            reason=f"Art. 17 request from {SUBJECT} (ticket 2026-4410)",
            subject_id=account.pk,
            now=now,
        ),
        api.request_erasure(
            requested_by=alice,
            reason=f"Contract with {OFFBOARDED} ended; offboarding after the grace period",
            tenant_id=OFFBOARDED,
            now=now,
        ),
    ]
    for erasure in filed:
        api.approve_erasure(erasure, approver=bob, now=now)
        whom = f"tenant {erasure.tenant_id}" if not erasure.subject_digest else SUBJECT
        reached = [c for c in erasure.scope["classes"] if c["reachable"] and c["count"]]
        out(
            f"  {AUTHOR} filed, {APPROVER} approved the erasure of {whom} (request "
            f"{erasure.pk}), due {fmt(erasure.due_at)}: {erasure.scope['total']} item(s) in "
            f"{and_list([c['data_class'] for c in reached]) or 'no class'}."
        )


def certificates(out: Out, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for erasure in ErasureRequest.objects.order_by("received_at", "pk"):
        try:
            certificate = api.erasure_certificate(erasure)
        except api.RetentionError as exc:
            raise CommandError(f"Erasure request {erasure.pk}: {exc}") from exc
        whom = f"tenant {erasure.tenant_id}" if not erasure.subject_digest else SUBJECT
        out(f"Erasure of {whom}: {certificate['state'].replace('_', ' ')}.")
        for entry in certificate["classes"]:
            out(f"  {entry['data_class']}: {_what(entry)}")
        path = directory / f"certificate-{erasure.pk}.json"
        path.write_text(json.dumps(certificate, indent=1), encoding="utf-8")
        out(f"  Certificate: {path}")


def _what(entry: dict[str, object]) -> str:
    if not entry["reachable"]:
        return f"not reached ({entry['not_reachable_because']})"
    if entry["on_erasure"] == "keep":
        return f"kept: {entry['basis']}"
    done = [f"{entry['erased']} erased"] if entry["erased"] else []
    done += [f"{entry['redacted']} redacted"] if entry["redacted"] else []
    kept = entry["kept"]
    assert isinstance(kept, list)
    done += [f"{k['count']} kept under hold #{k['hold']} ({k['reason']})" for k in kept]
    return and_list(done) or "nothing found"
