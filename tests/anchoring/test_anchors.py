"""Chain heads signed and anchored outside the database (issue 17, point 4).

Anchors are written when a run that appended events closes (inline, queued,
reconciliation) and by the watchdog once RETENTION_ANCHOR_INTERVAL passed;
never when the head did not move; and a store that cannot be written never
fails the run.
"""

from __future__ import annotations

import base64
import logging
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.storage import storages
from django.test import override_settings
from freezegun import freeze_time

from retention import engine, tasks
from retention.anchoring import signing
from retention.anchoring.stores import (
    AnchorExists,
    DirectoryAnchorStore,
    S3AnchorStore,
    location_parse,
)
from retention.chain.anchors import (
    ANCHORED,
    FAILED,
    NOT_DUE,
    UNCHANGED,
    chain_anchor,
    chain_anchor_due,
)
from retention.models import ChainHead, EventBatch, RunStatus
from retention.receipts.signed_heads import (
    anchor_name,
    head_parse,
    head_verify,
    key_id,
    public_key_load,
)
from tests.anchoring.helpers import head, heads_in, new_key, s3_anchor_setting
from tests.fakes import queued
from tests.helpers import dry_run, enforce, put_tracked

pytestmark = pytest.mark.django_db


def trusted(public_b64: str) -> dict[str, bytes]:
    raw = public_key_load(public_b64)
    return {key_id(raw): raw}


def expired(n: int, now: Any, **kwargs: Any) -> list[Any]:
    return [put_tracked(now=now - timedelta(days=40, seconds=i), **kwargs) for i in range(n)]


# --------------------------------------------------------------------------
# The statement


def test_signed_head__canonical_json_signed_by_the_key_and_any_edit_breaks_it(now):
    seed, public = new_key()
    signer = signing.signer_load(seed)
    signed = signing.head_sign(seq=7, chain="ab" * 32, anchored_at=now, signer=signer)

    body = signed.to_bytes()
    assert body == (
        b'{"anchored_at":"2026-03-14T12:00:00.000000Z","chain":"' + b"ab" * 32 + b'",'
        b'"format":"lethe-anchor-v1","key_id":"' + signer.key_id.encode() + b'","seq":7,'
        b'"signature":"' + signed.signature.encode() + b'"}\n'
    )
    assert signer.key_id == key_id(base64.b64decode(public))
    assert len(base64.b64decode(signed.signature)) == 64
    assert head_verify(head_parse(body), trusted(public)) is None
    assert signed.name == "heads/00000000000000000007.json"
    for field, value in (("seq", 8), ("chain", "cd" * 32), ("anchored_at", "2030-01-01")):
        forged = {**signed.as_json(), field: value}
        assert head_verify(head_parse(forged), trusted(public)) == (
            "bad signature: the statement is not what the key signed"
        )
    _, other = new_key()
    assert "which is not a trusted key" in head_verify(head_parse(body), trusted(other))
    assert seed not in repr(signer)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("relative/dir", "absolute path"),
        ("ftp://host/x", "unknown scheme"),
        ("s3://", "s3://bucket"),
        ({"url": "s3://b", "acl": "public"}, "unknown key(s) 'acl'"),
        ({"url": "/srv/anchors", "endpoint_url": "http://x"}, "S3 client options"),
        (42, "a string or a dict"),
    ],
)
def test_location__malformed_values_are_refused(value, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        location_parse(value)


def test_location__s3_bucket_and_prefix_and_directories():
    s3 = location_parse({"url": "s3://evidence/lethe/prod/", "region_name": "eu-west-1"})
    assert (s3.kind, s3.bucket, s3.prefix, s3.options) == (
        "s3",
        "evidence",
        "lethe/prod/",
        {"region_name": "eu-west-1"},
    )
    assert location_parse("s3://evidence").prefix == ""
    assert location_parse("file:///srv/anchors/").path == "/srv/anchors"
    assert location_parse("") is None


# --------------------------------------------------------------------------
# When anchors are written


def test_run__that_appended_events_anchors_the_head_in_a_directory(
    make_policy, now, anchor_dir, anchored_run, signing_key
):
    make_policy()
    expired(3, now)

    run = anchored_run(now=now)

    assert run.deleted == 3
    chain_head = head()
    assert chain_head.seq >= 1
    (signed,) = heads_in(anchor_dir)
    assert (signed.seq, signed.chain) == (chain_head.seq, chain_head.chain)
    assert signed.anchored_at == "2026-03-14T12:00:00.000000Z"
    assert head_verify(signed, trusted(signing_key)) is None
    assert (chain_head.anchored_seq, chain_head.anchored_at) == (chain_head.seq, now)
    file = anchor_dir / anchor_name(signed.seq)
    assert file.stat().st_mode & 0o777 == 0o444
    assert [p.name for p in file.parent.iterdir()] == [file.name]  # no temporary left behind


def test_run__anchors_into_s3_under_the_prefix(
    make_policy, now, settings, signing_key, anchored_run, s3_server, s3_bucket, s3_client
):
    settings.RETENTION_EVIDENCE_ANCHOR = s3_anchor_setting(s3_server.endpoint_url, s3_bucket)
    make_policy()
    expired(2, now)

    anchored_run(now=now)
    expired(1, now + timedelta(days=1))
    anchored_run(now=now + timedelta(days=1))

    listed = s3_client.list_objects_v2(Bucket=s3_bucket)["Contents"]
    keys = [entry["Key"] for entry in listed]
    seqs = list(EventBatch.objects.order_by("seq").values_list("seq", flat=True))
    assert len(keys) == 2
    assert keys[-1] == f"lethe/evidence/heads/{seqs[-1]:020d}.json"
    body = s3_client.get_object(Bucket=s3_bucket, Key=keys[-1])["Body"].read()
    signed = head_parse(body)
    assert (signed.seq, signed.chain) == (head().seq, head().chain)
    assert head_verify(signed, trusted(signing_key)) is None


def test_s3_store__refuses_to_overwrite_and_compliance_mode_keeps_the_anchor(
    s3_server, s3_object_lock_bucket, s3_client, now
):
    s3_client.put_object_lock_configuration(
        Bucket=s3_object_lock_bucket,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 1}},
        },
    )
    store = S3AnchorStore(
        location_parse(s3_anchor_setting(s3_server.endpoint_url, s3_object_lock_bucket, "a"))
    )
    store.put("heads/00000000000000000001.json", b"{}")

    with pytest.raises(AnchorExists):
        store.put("heads/00000000000000000001.json", b'{"forged": true}')
    assert store.get("heads/00000000000000000001.json") == b"{}"
    key = "a/heads/00000000000000000001.json"
    # (moto answers GetObjectRetention with 500; HeadObject shows the lock.)
    stored = s3_client.head_object(Bucket=s3_object_lock_bucket, Key=key)
    assert stored["ObjectLockMode"] == "COMPLIANCE"
    with pytest.raises(s3_client.exceptions.ClientError, match="AccessDenied"):
        s3_client.delete_object(
            Bucket=s3_object_lock_bucket, Key=key, VersionId=stored["VersionId"]
        )


def test_directory_store__never_overwrites(tmp_path):
    store = DirectoryAnchorStore(tmp_path)
    store.put("heads/00000000000000000001.json", b"first")

    with pytest.raises(AnchorExists):
        store.put("heads/00000000000000000001.json", b"second")
    assert store.get("heads/00000000000000000001.json") == b"first"
    assert store.names() == ["heads/00000000000000000001.json"]


def test_no_anchor__when_the_head_did_not_move(make_policy, now, anchor_dir, anchored_run):
    make_policy()
    expired(2, now)
    anchored_run(now=now)
    (first,) = heads_in(anchor_dir)

    nothing = anchored_run(now=now + timedelta(hours=2))  # nothing expired since
    dry_run(now=now + timedelta(hours=3))

    assert nothing.status == RunStatus.FINISHED and nothing.deleted == 0
    assert heads_in(anchor_dir) == [first]
    assert chain_anchor(now=now + timedelta(hours=4)).status == UNCHANGED
    with freeze_time(now + timedelta(days=2)):
        tasks.runs_resume()
    assert heads_in(anchor_dir) == [first]


def test_no_anchor__while_anchoring_is_off(make_policy, now, tmp_path, anchored_run, settings):
    settings.RETENTION_EVIDENCE_ANCHOR = str(tmp_path / "anchors")  # no signing key
    make_policy()
    expired(1, now)

    anchored_run(now=now)

    assert not (tmp_path / "anchors").exists()
    assert head().anchored_seq == 0


def test_watchdog__anchors_a_moved_head_once_the_interval_passed(
    make_policy, now, anchor_dir, anchored_run, settings
):
    settings.RETENTION_ANCHOR_INTERVAL = timedelta(hours=1)
    make_policy()
    expired(1, now)
    anchored_run(now=now)
    anchored_at = head().anchored_at
    # The head moves without an anchor (as events appended by a run that died do).
    with override_settings(RETENTION_SIGNING_KEY=""):
        expired(1, now + timedelta(minutes=5))
        anchored_run(now=now + timedelta(minutes=5))
    moved = head()
    assert moved.seq > moved.anchored_seq

    assert chain_anchor_due(now=now + timedelta(minutes=30)).status == NOT_DUE
    with freeze_time(now + timedelta(minutes=59)):
        tasks.runs_resume()
    assert [h.seq for h in heads_in(anchor_dir)] == [moved.anchored_seq]

    with freeze_time(now + timedelta(minutes=61)):
        tasks.runs_resume()

    assert [h.seq for h in heads_in(anchor_dir)][-1] == moved.seq
    assert head().anchored_seq == moved.seq
    assert head().anchored_at > anchored_at


def test_unwritable_store__never_fails_the_run_and_the_watchdog_retries(
    make_policy, now, settings, signing_key, tmp_path, anchored_run, caplog
):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    settings.RETENTION_EVIDENCE_ANCHOR = str(blocker / "anchors")
    make_policy()
    records = expired(2, now)

    with caplog.at_level(logging.INFO, logger="retention"):
        run = anchored_run(now=now)

    assert run.status == RunStatus.FINISHED and run.deleted == 2
    assert not any(storages["default"].exists(r.object_key) for r in records)
    assert head().anchored_seq == 0 and head().anchored_at is None
    (failure,) = [r for r in caplog.records if r.name == "retention.anchors"]
    assert failure.levelno == logging.ERROR
    assert f"chain head at batch {head().seq} not anchored" in failure.getMessage()
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert settings.RETENTION_SIGNING_KEY not in logged

    settings.RETENTION_EVIDENCE_ANCHOR = str(tmp_path / "anchors")
    with freeze_time(now + timedelta(minutes=1)):
        tasks.runs_resume()

    assert [h.seq for h in heads_in(tmp_path / "anchors")] == [head().seq]
    assert head().anchored_seq == head().seq


def test_unreachable_bucket__never_fails_the_run(
    make_policy, now, settings, signing_key, anchored_run, s3_server, caplog
):
    settings.RETENTION_EVIDENCE_ANCHOR = s3_anchor_setting(s3_server.endpoint_url, "no-such-bkt")
    make_policy()
    expired(1, now)

    with caplog.at_level(logging.ERROR, logger="retention.anchors"):
        run = anchored_run(now=now)

    assert run.status == RunStatus.FINISHED and run.deleted == 1
    assert head().anchored_seq == 0
    assert "NoSuchBucket" in caplog.text
    assert "testing" not in caplog.text  # the credentials


def test_anchor_already_written_by_another_closer_is_recorded(
    make_policy, now, anchor_dir, settings
):
    make_policy()
    expired(1, now)
    enforce(now=now)  # anchors only after the commit, which this test does not run
    signer = signing.signer_load(settings.RETENTION_SIGNING_KEY)
    current = head()
    signed = signing.head_sign(seq=current.seq, chain=current.chain, anchored_at=now, signer=signer)
    DirectoryAnchorStore(anchor_dir).put(signed.name, signed.to_bytes())

    outcome = chain_anchor(now=now + timedelta(seconds=1))

    assert outcome.status == ANCHORED
    assert head().anchored_seq == current.seq
    assert heads_in(anchor_dir) == [signed]


def test_anchor_of_the_same_seq_with_another_chain__is_refused_and_logged(
    make_policy, now, anchor_dir, settings, caplog
):
    make_policy()
    expired(1, now)
    enforce(now=now)
    signer = signing.signer_load(settings.RETENTION_SIGNING_KEY)
    older = signing.head_sign(seq=head().seq, chain="00" * 32, anchored_at=now, signer=signer)
    DirectoryAnchorStore(anchor_dir).put(older.name, older.to_bytes())

    with caplog.at_level(logging.ERROR, logger="retention.anchors"):
        outcome = chain_anchor(now=now)

    assert outcome.status == FAILED
    assert head().anchored_seq == 0
    assert "restored from an older dump, or rewritten" in caplog.text
    assert heads_in(anchor_dir) == [older]


def test_reconciliation_that_appended_events_anchors(make_policy, now, anchor_dir, committed):
    make_policy()
    record = put_tracked(key="acme/lost", now=now - timedelta(days=40))
    storages["default"].delete(record.object_key)  # gone before any run: missing
    before = head().seq

    run = committed(lambda: engine.reconcile_run(now=now))

    assert run.report["counts"]["missing"] == 1
    assert head().seq > before
    assert [h.seq for h in heads_in(anchor_dir)] == [head().seq]


def test_queued_run_anchors_when_its_last_batch_closes_it(make_policy, now, anchor_dir, committed):
    make_policy(batch_size=2)
    expired(5, now)

    run, _ = committed(lambda: queued(now))

    assert (run.status, run.deleted) == (RunStatus.FINISHED, 5)
    assert [h.seq for h in heads_in(anchor_dir)] == [ChainHead.objects.get().seq]
