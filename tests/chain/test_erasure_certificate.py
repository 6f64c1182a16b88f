"""The certificate of an erasure request (issue 29, point 4), as the server issues it.

It says per class of the frozen scope what was erased, redacted and kept (the
hold and its reason, or the legal basis), names the subject by its digest
only, and commits to the request's events in the chain: their count, the
Merkle root of their leaves in chain order, the chain head; signed when
``RETENTION_SIGNING_KEY`` is set. A certificate that would not verify is
never issued.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from retention import api
from retention.chain import erasure_certificate as issuing
from retention.chain.erasure_certificate import erasure_certificate_issue
from retention.digest import subject_digest
from retention.models import ChainHead, ErasureState
from retention.receipts import certificate as checking
from retention.receipts import evidence
from retention.receipts.certificate import (
    EMPTY_ROOT,
    FORMAT,
    certificate_check,
    certificate_hash,
    certificate_problems,
    signed_bytes,
)
from tests.anchoring.helpers import new_key
from tests.certificates import (
    BASIS,
    HOLD_REASON,
    SUBJECT,
    Settled,
    governed_host,
    received,
    settle,
    settled_request,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def settled(make_policy: Any, row_registry: Any, now: datetime) -> Settled:
    return settled_request(make_policy, now)


def _issue(settled: Settled, now: datetime) -> dict[str, Any]:
    return erasure_certificate_issue(settled.request, now=now + timedelta(days=2, minutes=5))


def _by_class(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["data_class"]: entry for entry in doc["classes"]}


def test_certificate__says_per_class_what_was_erased_redacted_and_kept(settled, now):
    doc = _issue(settled, now)

    classes = _by_class(doc)
    assert classes["idv.photo"] == {
        "data_class": "idv.photo",
        "kind": "tracked",
        "policy_version": 1,
        "on_erasure": "delete",
        "reachable": True,
        "not_reachable_because": "",
        "found": 3,
        "erased": 2,
        "redacted": 0,
        "kept": [{"hold": settled.hold.pk, "reason": HOLD_REASON, "count": 1}],
        "basis": "",
        "left": 0,
        "verified": True,
    }
    assert [classes["accounts.closed"][k] for k in ("kind", "found", "erased")] == ["rows", 1, 1]
    assert [classes["newsletter.subscriber"][k] for k in ("on_erasure", "redacted")] == [
        "redact",
        1,
    ]
    invoice = classes["billing.invoice"]
    assert (invoice["on_erasure"], invoice["found"], invoice["erased"], invoice["basis"]) == (
        "keep",
        1,
        0,
        BASIS,
    )
    logs = classes["logs.request"]
    assert (logs["reachable"], logs["found"], logs["verified"]) == (False, 0, None)
    assert logs["not_reachable_because"].startswith("no subject link")
    assert doc["totals"] == {"found": 6, "erased": 3, "redacted": 1, "kept": 1, "left": 0}
    assert [e["data_class"] for e in doc["classes"]] == sorted(classes)
    assert doc["state"] == "partially_completed"
    assert certificate_problems(doc) == []


def test_certificate__names_the_subject_by_its_digest_only_with_times_in_utc(settled, now):
    doc = _issue(settled, now)

    assert doc["format"] == FORMAT
    assert (doc["id"], doc["subject_digest"], doc["tenant_id"]) == (
        str(settled.request.pk),
        subject_digest(SUBJECT),
        None,
    )
    assert SUBJECT not in json.dumps(doc)
    assert (doc["received_at"], doc["approved_at"], doc["due_at"]) == (
        "2026-03-14T12:00:00.000000Z",
        "2026-03-14T13:00:00.000000Z",
        "2026-04-13T12:00:00.000000Z",
    )
    assert doc["completed_at"] == doc["verified_at"] == "2026-03-16T12:00:00.000000Z"
    assert doc["issued_at"] == "2026-03-16T12:05:00.000000Z"


def test_certificate__commits_to_the_requests_events_in_chain_order_and_the_head(settled, now):
    doc = _issue(settled, now)

    leaves = [event.event_hash for event in settled.events]
    assert len(leaves) == 5
    assert settled.other.event_hash not in leaves  # another run's event, between them
    head = ChainHead.objects.get(pk=1)
    assert doc["events"] == {
        "count": 5,
        "root": evidence.merkle_root([bytes.fromhex(leaf) for leaf in leaves]).hex(),
        "leaves": leaves,
        "runs": [str(settled.run.pk)],
        "head": {"seq": head.seq, "chain": head.chain},
    }
    assert [e.batch.seq for e in settled.events] == [1, 1, 1, 3, 3]


def test_certificate__carries_the_hash_of_its_content_and_is_unsigned_without_a_key(settled, now):
    doc = _issue(settled, now)

    assert "signature" not in doc and "key_id" not in doc
    assert doc["hash"] == certificate_hash(doc)
    assert doc == json.loads(json.dumps(doc))  # JSON as it is, no encoder needed


def test_certificate__signed_with_the_signing_key_over_everything_but_the_signature(
    settled, now, settings
):
    seed, public = new_key()
    settings.RETENTION_SIGNING_KEY = seed

    doc = _issue(settled, now)

    raw = base64.b64decode(public)
    assert doc["key_id"] == checking.key_id(raw)
    # Raises when the signature does not hold.
    Ed25519PublicKey.from_public_bytes(raw).verify(
        base64.b64decode(doc["signature"]), signed_bytes(doc)
    )
    assert doc["hash"] == certificate_hash({k: v for k, v in doc.items() if k != "signature"})
    assert certificate_check(doc, public_key=raw, receipts=[]) == []


def test_certificate__an_unknown_subject_gives_a_valid_certificate_that_found_nothing(
    make_policy, row_registry, now
):
    governed_host(make_policy)
    request = received("nobody@x.test", now)
    settle(request, classes={}, state=ErasureState.COMPLETED, now=now + timedelta(days=1))

    doc = erasure_certificate_issue(request, now=now + timedelta(days=1))

    assert doc["totals"] == {"found": 0, "erased": 0, "redacted": 0, "kept": 0, "left": 0}
    assert doc["events"]["count"] == 0
    assert doc["events"]["root"] == EMPTY_ROOT
    assert doc["events"]["leaves"] == []
    assert all(c["found"] == 0 for c in doc["classes"])
    assert {c["data_class"] for c in doc["classes"] if c["reachable"]} >= {"idv.photo"}
    assert certificate_problems(doc) == []


def test_certificate__stored_by_the_engine_is_what_the_api_returns(settled, now):
    doc = _issue(settled, now)
    settled.request.certificate = doc
    settled.request.save(update_fields=["certificate"])

    assert api.erasure_certificate(settled.request) == doc


def test_certificate__not_issued_before_the_request_completes(settled, now):
    settled.request.state = ErasureState.EXECUTING

    with pytest.raises(ValueError, match="not while it is executing"):
        _issue(settled, now)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"erased": 4}, "more than the 3 items its scope found"),
        ({"on_erasure": "redact"}, "its outcome says redact"),
        ({"kept": []}, None),  # then nothing kept: a partial completion without a reason
    ],
)
def test_certificate__an_outcome_that_contradicts_the_scope_is_refused(
    settled, now, change, message
):
    settled.request.outcome["classes"]["idv.photo"].update(change)

    with pytest.raises(ValueError, match=message or "partially completed, yet nothing is kept"):
        _issue(settled, now)


def test_certificate__an_outcome_silent_on_a_class_with_items_is_refused(settled, now):
    del settled.request.outcome["classes"]["accounts.closed"]

    with pytest.raises(ValueError, match="says nothing of accounts.closed"):
        _issue(settled, now)


def test_certificate__over_the_leaf_limit_lists_no_leaves_and_still_verifies(
    settled, now, monkeypatch
):
    monkeypatch.setattr(issuing, "LEAVES_LISTED_MAX", 4)
    monkeypatch.setattr(checking, "LEAVES_LISTED_MAX", 4)

    doc = _issue(settled, now)

    assert (doc["events"]["count"], doc["events"]["leaves"]) == (5, None)
    assert doc["events"]["root"] == _issue(settled, now)["events"]["root"]
    assert certificate_problems(doc) == []
