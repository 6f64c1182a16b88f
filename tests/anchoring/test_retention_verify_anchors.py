"""`retention_verify --anchors`: the chain against every signed head anchored outside it.

A restore of a dump taken before a run leaves a chain that verifies on its
own, behind its anchors (a rollback); a rewrite of every event with every
hash recomputed, and the head, verifies on its own too, and disagrees with
its anchors. Both exit 1, named.
"""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from retention.anchoring import signing
from retention.models import DeletionEvent, EventBatch
from retention.receipts.signed_heads import anchor_name
from tests.anchoring.helpers import head, heads_in, new_key, rewrite_every_event, s3_anchor_setting
from tests.helpers import database_dump, database_restore, put_tracked

pytestmark = pytest.mark.django_db


def verify(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("retention_verify", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def refused(*args: str) -> str:
    with pytest.raises(CommandError) as excinfo:
        verify(*args)
    return str(excinfo.value)


@pytest.fixture
def two_anchored_runs(make_policy, now, anchor_dir, anchored_run) -> list[int]:
    """Two enforcing runs, each anchored; the anchored seqs."""
    make_policy(batch_size=2)
    for day in range(2):
        at = now + timedelta(days=day)
        for i in range(3):
            put_tracked(tenant_id=f"t{i}", now=at - timedelta(days=31, seconds=i))
        anchored_run(now=at)
    seqs = [signed.seq for signed in heads_in(anchor_dir)]
    assert len(seqs) == 2 and seqs[-1] == head().seq
    return seqs


def test_anchors__an_untouched_chain_agrees_with_every_anchor(two_anchored_runs):
    out, _ = verify("--anchors")

    first, last = two_anchored_runs
    assert "Chain intact." in out
    assert "Checked 2 anchored heads in " in out
    assert f"(batches {first}..{last}) against the chain head at batch {last}" in out
    assert out.rstrip().endswith("Anchors agree with the chain.")


@pytest.mark.parametrize("store", ["directory", "s3"])
def test_anchors__a_database_restored_from_a_dump_before_a_run_is_a_rollback(
    store, make_policy, now, tmp_path, settings, signing_key, anchored_run, request
):
    if store == "s3":
        server = request.getfixturevalue("s3_server")
        bucket = request.getfixturevalue("s3_bucket")
        settings.RETENTION_EVIDENCE_ANCHOR = s3_anchor_setting(server.endpoint_url, bucket)
    else:
        settings.RETENTION_EVIDENCE_ANCHOR = str(tmp_path / "anchors")
    make_policy()
    put_tracked(key="acme/oldest", now=now - timedelta(days=90))
    anchored_run(now=now - timedelta(days=20))  # a history before the dump
    before = head().seq
    dump = database_dump(tmp_path / "before.json")
    for n in range(3):
        put_tracked(key=f"acme/old-{n}", now=now - timedelta(days=40))
    assert anchored_run(now=now).deleted == 3
    anchored = head().seq
    assert anchored > before and head().anchored_seq == anchored

    database_restore(dump)

    assert head().seq == before
    out, _ = verify()  # the chain on its own: intact
    assert "Chain intact." in out
    message = refused("--anchors")
    assert message == (
        f"rollback: the database is behind anchor {anchored} (its chain head is at batch "
        f"{before}; anchored 2026-03-14 12:00 UTC)"
    )


def test_anchors__a_rollback_the_chain_grew_past_again_is_a_rewrite(
    make_policy, now, tmp_path, anchor_dir, anchored_run, caplog
):
    make_policy()
    dump = database_dump(tmp_path / "before.json")
    for n in range(2):
        put_tracked(key=f"acme/a-{n}", now=now - timedelta(days=40))
    anchored_run(now=now)
    anchored = head().seq
    database_restore(dump)
    # After the restore, runs append other batches under the same seqs.
    for n in range(anchored):
        put_tracked(key=f"acme/b-{n}", now=now - timedelta(days=40))
        anchored_run(now=now + timedelta(hours=n + 1))
    assert head().seq >= anchored

    message = refused("--anchors")

    assert f"rewrite: batch {anchored} disagrees with its anchor" in message
    # The anchor was not overwritten by the run that reached its seq again.
    assert [signed.seq for signed in heads_in(anchor_dir)].count(anchored) == 1
    assert "restored from an older dump, or rewritten" in caplog.text


def test_anchors__every_event_and_the_head_rewritten_consistently_is_a_rewrite(
    two_anchored_runs,
):
    rewrite_every_event()

    out, _ = verify()  # every leaf, root, link and the head agree: the chain check passes
    assert "Chain intact." in out
    message = refused("--anchors")
    first, last = two_anchored_runs
    assert message == (
        f"rewrite: batch {first} disagrees with its anchor; "
        f"rewrite: batch {last} disagrees with its anchor"
    )


def test_anchors__a_broken_chain_and_an_anchored_batch_gone_are_both_named(two_anchored_runs):
    last = two_anchored_runs[-1]
    DeletionEvent.objects.filter(batch__seq=last).delete()
    EventBatch.objects.filter(seq=last).delete()

    message = refused("--anchors")

    assert message == (
        f"chain broken: the chain head says batch {last}, the chain ends at batch {last - 1}; "
        f"rewrite: batch {last} was anchored and is gone"
    )


def test_anchors__a_tampered_signature_or_statement_is_reported(two_anchored_runs, anchor_dir):
    first, last = two_anchored_runs
    path = anchor_dir / anchor_name(first)
    path.chmod(0o644)
    statement = json.loads(path.read_text())
    statement["anchored_at"] = "2020-01-01T00:00:00.000000Z"
    path.write_text(json.dumps(statement))

    message = refused("--anchors")

    assert message == (f"anchor {first}: bad signature: the statement is not what the key signed")


def test_anchors__a_head_signed_by_another_key_is_refused_unless_trusted(
    two_anchored_runs, anchor_dir, now
):
    first, _ = two_anchored_runs
    seed, public = new_key()
    other = signing.signer_load(seed)
    path = anchor_dir / anchor_name(first)
    path.chmod(0o644)
    batch = EventBatch.objects.get(seq=first)
    resigned = signing.head_sign(seq=first, chain=batch.chain, anchored_at=now, signer=other)
    path.write_bytes(resigned.to_bytes())

    message = refused("--anchors")
    assert message.startswith(f"anchor {first}: signed by key {other.key_id}, which is not")

    out, _ = verify("--anchors", "--public-key", public)
    assert "Anchors agree with the chain." in out


def test_anchors__an_anchor_removed_from_the_store_is_reported(two_anchored_runs, anchor_dir):
    _, last = two_anchored_runs
    (anchor_dir / anchor_name(last)).unlink()

    message = refused("--anchors")

    assert message.startswith(
        f"anchor {last} is not in the store, though the database recorded it as anchored"
    )


def test_anchors__options_that_do_not_go_together_are_refused(settings, db):
    assert refused("--runs", "--anchors").startswith("--runs checks every closed run;")
    assert refused("--anchors", "--since", "2026-01-01T00:00Z").startswith(
        "--anchors compares every anchor with the whole chain"
    )
    assert refused("--public-key", "AAAA") == "--public-key goes with --anchors."
    settings.RETENTION_EVIDENCE_ANCHOR = ""
    assert refused("--anchors") == (
        "--anchors needs RETENTION_EVIDENCE_ANCHOR: no anchor store is set."
    )
    settings.RETENTION_EVIDENCE_ANCHOR = "/srv/anchors"
    settings.RETENTION_SIGNING_KEY = ""
    assert refused("--anchors").startswith("--anchors needs a public key")
    assert refused("--anchors", "--public-key", "AAAA") == (
        "--public-key: the public key has 3 bytes, not 32"
    )


def test_anchors__with_export_head_writes_the_head_after_the_checks(
    two_anchored_runs, tmp_path: Path
):
    target = tmp_path / "head.json"

    out, _ = verify("--anchors", "--export-head", str(target))

    assert json.loads(target.read_text())["head"]["seq"] == two_anchored_runs[-1]
    assert out.rstrip().endswith(f"Wrote the chain head to {target}.")
