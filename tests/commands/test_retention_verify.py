"""Tamper evidence: direct database edits are found at the right link."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from retention import engine
from retention.models import DeletionEvent, EventBatch, RunMode
from retention.selectors.evidence import chain_head, receipt_for
from tests.helpers import on_own_connection, put_tracked

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def chained(make_policy, now):
    """Three enforce runs, several batches of deleted and skipped events."""
    make_policy(batch_size=3)
    for day in range(3):
        at = now + timedelta(days=day)
        for i in range(4):
            put_tracked(tenant_id=f"t{i % 2}", now=at - timedelta(days=31, seconds=i))
        run = engine.run_start(mode=RunMode.ENFORCE, now=at)
        engine.run_execute(run=run, clock=lambda at=at: at)
    assert EventBatch.objects.count() >= 6
    return list(EventBatch.objects.order_by("seq"))


def verify() -> str:
    out = StringIO()
    call_command("retention_verify", stdout=out, stderr=StringIO())
    return out.getvalue()


def broken() -> str:
    with pytest.raises(CommandError) as exc:
        verify()
    return str(exc.value)


@pytest.mark.django_db
def test_verify__untouched_chain_is_intact_and_says_what_it_checked(chained):
    output = verify()
    events = DeletionEvent.objects.count()
    assert f"{len(chained)} batches, {events} events (batches 1..{len(chained)})" in output
    assert "Chain intact." in output


@pytest.mark.django_db
def test_verify__an_edited_event_is_named(chained):
    victim = DeletionEvent.objects.filter(batch=chained[2]).order_by("leaf_index")[1]
    DeletionEvent.objects.filter(pk=victim.pk).update(outcome="failed")
    assert broken() == f"chain broken: event {victim.pk} (batch 3) was altered after recording"


@pytest.mark.django_db
def test_verify__an_event_edited_with_its_hash_breaks_its_batch_root(chained):
    from retention.receipts import evidence
    from retention.selectors.evidence import event_fields

    victim = DeletionEvent.objects.filter(batch=chained[1]).first()
    victim.reason = "nothing to see"
    DeletionEvent.objects.filter(pk=victim.pk).update(
        reason=victim.reason, event_hash=evidence.leaf_hash(event_fields(victim)).hex()
    )
    assert broken() == "chain broken: batch 2: its events do not hash to its root"


@pytest.mark.django_db
def test_verify__a_removed_event_is_found_in_its_batch(chained):
    victim = DeletionEvent.objects.filter(batch=chained[3]).order_by("leaf_index").first()
    DeletionEvent.objects.filter(pk=victim.pk).delete()
    assert broken().startswith("chain broken: batch 4 should hold events 0..")


@pytest.mark.django_db
def test_verify__an_event_inserted_without_a_batch_is_outside_the_chain(chained):
    model = DeletionEvent.objects.first()
    model.pk = None
    model.idempotency_key = "forged"
    model.batch = None
    model.leaf_index = None
    model.save()
    assert (
        broken()
        == f"chain broken: event {model.pk} is outside the chain (inserted without a batch)"
    )


@pytest.mark.django_db
def test_verify__an_event_inserted_into_a_batch_is_found(chained):
    model = DeletionEvent.objects.filter(batch=chained[0]).first()
    model.pk = None
    model.idempotency_key = "forged-in-batch"
    model.leaf_index = chained[0].size
    model.save()
    assert broken().startswith("chain broken: batch 1 should hold events 0..")


@pytest.mark.django_db
def test_verify__swapped_events_break_the_root(chained):
    batch = next(b for b in chained if b.size >= 2)
    first, second = DeletionEvent.objects.filter(batch=batch).order_by("leaf_index")[:2]
    DeletionEvent.objects.filter(pk=first.pk).update(leaf_index=999)
    DeletionEvent.objects.filter(pk=second.pk).update(leaf_index=first.leaf_index)
    DeletionEvent.objects.filter(pk=first.pk).update(leaf_index=second.leaf_index)
    assert broken() == f"chain broken: batch {batch.seq}: its events do not hash to its root"


@pytest.mark.django_db
def test_verify__a_removed_batch_breaks_the_link(chained):
    victim = chained[2]
    DeletionEvent.objects.filter(batch=victim).delete()
    EventBatch.objects.filter(pk=victim.pk).delete()
    assert broken() == "chain broken: batch 3 is missing (next found: 4)"


@pytest.mark.django_db
def test_verify__swapped_batches_break_the_link(chained):
    a, b = chained[1], chained[2]
    EventBatch.objects.filter(pk=a.pk).update(seq=10_000)
    EventBatch.objects.filter(pk=b.pk).update(seq=a.seq)
    EventBatch.objects.filter(pk=a.pk).update(seq=b.seq)
    assert broken() == "chain broken: batch 2 does not link to batch 1"


@pytest.mark.django_db
def test_verify__a_truncated_chain_disagrees_with_its_head(chained):
    last = chained[-1]
    DeletionEvent.objects.filter(batch=last).delete()
    EventBatch.objects.filter(pk=last.pk).delete()
    assert broken() == (
        f"chain broken: the chain head says batch {last.seq}, "
        f"the chain ends at batch {last.seq - 1}"
    )


@pytest.mark.django_db
def test_verify__a_time_range_checks_only_its_batches(chained, now):
    out = StringIO()
    call_command(
        "retention_verify",
        "--since",
        (now + timedelta(days=1)).isoformat(),
        stdout=out,
        stderr=StringIO(),
    )
    later = [b for b in chained if b.created_at >= now + timedelta(days=1)]
    assert f"Checked the chosen range: {len(later)} batches" in out.getvalue()
    assert f"(batches {later[0].seq}..{later[-1].seq})" in out.getvalue()


@pytest.mark.django_db
def test_receipt__verifies_offline_and_a_changed_field_does_not(chained, tmp_path):
    event = DeletionEvent.objects.filter(outcome="deleted").order_by("id")[4]
    receipt = receipt_for(event)
    head = chain_head(from_seq=event.batch.seq)
    (tmp_path / "receipt.json").write_text(json.dumps(receipt))
    (tmp_path / "head.json").write_text(json.dumps(head))

    def run(receipt_file: str) -> subprocess.CompletedProcess[str]:
        # No Django settings in the environment: the verifier needs none.
        return subprocess.run(
            [sys.executable, "-m", "retention.receipts", "verify", receipt_file, "head.json"],
            cwd=tmp_path,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )

    ok = run("receipt.json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith(f"VERIFIED: record {event.record_id} deleted")

    receipt["event"]["occurred_at"] = "2020-01-01T00:00:00.000000Z"
    receipt.pop("event_hash")
    (tmp_path / "forged.json").write_text(json.dumps(receipt))
    forged = run("forged.json")
    assert forged.returncode == 1
    assert "NOT VERIFIED: the event is not included in its batch" in forged.stdout


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_verify__chain_written_by_concurrent_workers_is_intact(make_policy, now):
    make_policy(batch_size=5)
    for i in range(120):
        put_tracked(now=now - timedelta(days=31, seconds=i))
    run = engine.run_start(mode=RunMode.ENFORCE, now=now)
    barrier = threading.Barrier(3)

    def worker() -> None:
        barrier.wait(timeout=10)
        while True:
            claim = engine.records_claim(run=run, data_class="idv.photo", limit=5, now=now)
            if not claim.items:
                return
            engine.claim_dispose(claim=claim, clock=lambda: now)

    threads = [on_own_connection(worker) for _ in range(3)]
    for thread, _ in threads:
        thread.join(timeout=120)
    errors = [result["error"] for _, result in threads if "error" in result]
    assert not errors, errors
    assert DeletionEvent.objects.filter(outcome="deleted").count() == 120
    assert EventBatch.objects.count() == 24
    assert "Chain intact." in verify()
