"""The customer accounts in the report: closed ones past the cutoff must be redacted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.db.models import F

from retention.models import DataClassMode, DeletionEvent, EventOutcome, LegalHold, Policy
from uploads.apps import CLOSED_ACCOUNTS, REDACTED_NAME
from uploads.demo.checks import DemoCheck
from uploads.demo.classes import mode, rows_in_force
from uploads.demo.formatting import Out, and_list, fmt, period, span
from uploads.demo.seeds import ACCOUNTS
from uploads.models import CustomerAccount


def _masked(value: str) -> bool:
    """True when Mask(keep_last=2) has been over the value."""
    hidden = value[:-2] if len(value) > 2 else value
    return not value or set(hidden) == {"*"}


def _row_hold(holds: Sequence[LegalHold], label: str, pk: object, tenant: str) -> LegalHold | None:
    """The hold to name for a held row: its own first, else its tenant's or class's.

    Whether a row is held is ``api.row_holds``'s answer; this only picks a name.
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


def _account_redacted(
    account: CustomerAccount, now: datetime, cutoff: datetime | None
) -> tuple[str, str, str | None]:
    """A due account under no hold: (kind, text, the problem if it is not redacted)."""
    closed = account.closed_at
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
        return (
            "missed",
            f"NOT redacted: its {and_list(left)} still as written",
            f"account {account.pk} ({account.tenant_id}): closed {fmt(closed)}, "
            f"before the cutoff {fmt(cutoff)}, but its {and_list(left)} "
            f"{'is' if len(left) == 1 else 'are'} not redacted",
        )
    fate = (
        f"redacted (closed {span(now - closed)} ago): "
        f"email {account.email[:12]}..., phone {account.phone}"
    )
    return "redacted", fate, None


def report_accounts(out: Out, now: datetime, policy: Policy) -> DemoCheck:
    """The fate of every customer account; closed ones past the cutoff must be redacted."""
    run, cutoff, keep, holds = rows_in_force(CLOSED_ACCOUNTS, policy)
    hold_list = list(LegalHold.objects.rows_covering(CLOSED_ACCOUNTS).order_by("pk"))
    seeds = {seed.email: seed for seed in ACCOUNTS}
    accounts = list(
        CustomerAccount.objects.order_by(F("closed_at").asc(nulls_last=True), "tenant_id", "pk")
    )
    out(f"Customer accounts, data class {CLOSED_ACCOUNTS}: {mode(policy)}")

    width = max((len(a.name) for a in accounts), default=0)
    totals: Counter[str] = Counter()
    problems = []
    for account in accounts:
        closed = account.closed_at
        due = cutoff is not None and closed is not None and closed <= cutoff
        held = holds.covers(account.pk, account.tenant_id)
        if due and not held:
            kind, fate, problem = _account_redacted(account, now, cutoff)
            if problem is not None:
                problems.append(problem)
        else:
            kind, fate = _account_kept(account, now, keep, held, hold_list, policy)
            seed = seeds.get(account.email)
            if seed is None or (account.name, account.phone) != (seed.name, seed.phone):
                problems.append(
                    f"account {account.pk} ({account.tenant_id}): {fate}, but it is not as seeded"
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
