"""The tenant's offline verifier with a signed head (``python -m retention.receipts``).

It checks the head's Ed25519 signature, and that the receipt's walk to the
chain head passes through the signed batch with the signed hash; it still
needs neither Django nor a database.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from retention.models import DeletionEvent, EventBatch, EventOutcome
from retention.receipts.cli import main
from retention.receipts.signed_heads import head_parse, key_id
from retention.receipts.verify import receipt_signed_head_problems, signed_head_check
from retention.selectors.evidence import chain_head, receipt_for
from tests.anchoring.helpers import new_key, rewrite_every_event
from tests.helpers import put_tracked

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def trail(make_policy, now, anchor_dir, anchored_run) -> dict[str, Any]:
    """Two anchored runs; the files a tenant saves for an event of each."""
    make_policy(batch_size=1)
    events = []
    for day in range(2):
        at = now + timedelta(days=day)
        for i in range(day + 1):  # the second run: two pages, two batches
            put_tracked(now=at - timedelta(days=31, seconds=i))
        anchored_run(now=at)
        events.append(DeletionEvent.objects.filter(outcome=EventOutcome.DELETED).latest("id"))
    anchors = sorted(anchor_dir.glob("heads/*.json"))
    assert len(anchors) == 2
    return {"events": events, "anchors": anchors}


def save(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value))
    return str(path)


def verifier(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # No Django settings in the environment: the verifier needs none.
    return subprocess.run(
        [sys.executable, "-m", "retention.receipts", *args],
        cwd=cwd,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_offline__a_good_signed_head_verifies_and_a_tampered_one_does_not(
    trail, tmp_path, signing_key
):
    event = trail["events"][0]
    save(tmp_path / "receipt.json", receipt_for(event))
    save(tmp_path / "chain-head.json", chain_head(from_seq=event.batch.seq))
    latest = trail["anchors"][-1]
    signed = json.loads(latest.read_text())

    ok = verifier(
        "verify",
        "receipt.json",
        "chain-head.json",
        "--signed-head",
        str(latest),
        "--public-key",
        signing_key,
        cwd=tmp_path,
    )

    assert ok.returncode == 0, ok.stdout + ok.stderr
    lines = ok.stdout.splitlines()
    assert lines[0].startswith(f"VERIFIED: record {event.record_id} deleted")
    assert lines[1] == (
        f"VERIFIED: the head of batch {signed['seq']} was signed by key {signed['key_id']} "
        f"at {signed['anchored_at']}; the receipt's chain passes through it."
    )

    signed["chain"] = "0" * 64
    save(tmp_path / "forged-head.json", signed)
    forged = verifier(
        "verify",
        "receipt.json",
        "chain-head.json",
        "--signed-head",
        "forged-head.json",
        "--public-key",
        signing_key,
        cwd=tmp_path,
    )
    assert forged.returncode == 1
    assert forged.stdout == (
        f"NOT VERIFIED: the signed head of batch {signed['seq']}: bad signature: "
        "the statement is not what the key signed\n"
    )


def test_offline__a_head_signed_by_another_key_is_not_verified(trail):
    signed = json.loads(trail["anchors"][-1].read_text())
    _, stranger = new_key()

    parsed, problems = signed_head_check(signed, _raw(stranger))

    assert parsed is not None
    assert problems == [
        f"the signed head of batch {parsed.seq}: signed by key {parsed.key_id}, which is not "
        f"a trusted key (trusted: {key_id(_raw(stranger))})"
    ]


def test_offline__a_signed_head_older_than_the_receipt_links_through_the_head_file(
    trail, signing_key
):
    older = head_parse(trail["anchors"][0].read_bytes())
    event = trail["events"][1]
    assert older.seq < event.batch.seq - 1
    receipt = receipt_for(event)

    # Links from the signed head's batch on: the walk reaches the receipt's batch.
    linked = chain_head(from_seq=older.seq)
    assert receipt_signed_head_problems(receipt, linked, older) == []

    # Links from the receipt's batch only: the verifier says which file to fetch.
    short = chain_head(from_seq=event.batch.seq)
    assert receipt_signed_head_problems(receipt, short, older) == [
        f"the chain head file has no link of batch {older.seq + 1}: "
        f"fetch it with ?from_seq={older.seq}"
    ]


def test_offline__a_trail_rewritten_after_the_head_was_signed_is_not_verified(
    trail, tmp_path, signing_key
):
    latest = head_parse(trail["anchors"][-1].read_bytes())
    rewrite_every_event()
    event = DeletionEvent.objects.get(pk=trail["events"][0].pk)
    receipt, head = receipt_for(event), chain_head(from_seq=event.batch.seq)

    # The rewritten receipt is consistent with the rewritten head ...
    assert signed_head_check(latest.as_json(), _raw(signing_key))[1] == []
    # ... but not with the head signed before the rewrite.
    assert receipt_signed_head_problems(receipt, head, latest) == [
        f"the chain does not pass through the signed hash of batch {latest.seq}: it was rewritten"
    ]


def test_offline__a_chain_head_behind_the_signed_head_is_a_rollback(trail, signing_key):
    latest = head_parse(trail["anchors"][-1].read_bytes())
    event = trail["events"][0]
    receipt = receipt_for(event)
    behind = chain_head(from_seq=event.batch.seq)
    behind["head"] = {"seq": event.batch.seq, "chain": event.batch.chain}
    behind["links"] = []

    problems = receipt_signed_head_problems(receipt, behind, latest)

    assert problems == [
        f"batch {latest.seq} was signed, but the chain head file ends at batch "
        f"{event.batch.seq}: the trail was rolled back since (or the chain head file is "
        "older than the signed head)"
    ]


def test_offline__verify_head_with_the_key_endpoints_json_and_a_later_chain_head(
    trail, tmp_path, signing_key, capsys
):
    older = trail["anchors"][0]
    seq = head_parse(older.read_bytes()).seq
    key_file = save(tmp_path / "key.json", {"algorithm": "Ed25519", "public_key": signing_key})
    head_file = save(tmp_path / "chain-head.json", chain_head(from_seq=seq))

    verified = main(
        ["verify-head", str(older), "--public-key", key_file, "--chain-head", head_file]
    )

    assert verified == 0
    top = EventBatch.objects.order_by("-seq").first().seq
    assert (
        capsys.readouterr()
        .out.rstrip()
        .endswith(f"the chain to head batch {top} passes through it.")
    )

    tampered = json.loads(older.read_text())
    tampered["seq"] += 1
    forged = save(tmp_path / "forged.json", tampered)
    assert main(["verify-head", forged, "--public-key", signing_key]) == 1
    assert "bad signature" in capsys.readouterr().out


def test_offline__signed_head_without_a_public_key_is_a_usage_error(trail, tmp_path):
    event = trail["events"][0]
    save(tmp_path / "receipt.json", receipt_for(event))
    save(tmp_path / "chain-head.json", chain_head(from_seq=event.batch.seq))

    result = verifier(
        "verify",
        "receipt.json",
        "chain-head.json",
        "--signed-head",
        str(trail["anchors"][0]),
        cwd=tmp_path,
    )

    assert result.returncode == 2
    assert "--signed-head and --public-key go together" in result.stderr


def _raw(public_b64: str) -> bytes:
    return base64.b64decode(public_b64)
