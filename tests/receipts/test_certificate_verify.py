"""Checking an erasure certificate offline: ``python -m retention.receipts verify CERT.json``.

Its signature (with the key ``/api/v1/deletions/chain/key/`` serves), its own
consistency, and that the tenant's receipts are of its events. Any change to
the file fails (exit 1), whether or not its hash was recomputed; input that
cannot be read exits 2; a good certificate prints one line and exits 0.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache

from retention.chain import erasure_certificate as issuing
from retention.chain.erasure_certificate import erasure_certificate_issue
from retention.digest import key_digest
from retention.receipts import certificate as checking
from retention.receipts.certificate import certificate_hash
from retention.receipts.cli import main
from retention.rest.services import tenant_key_create
from retention.selectors.evidence import receipt_for
from tests.anchoring.helpers import new_key
from tests.certificates import Settled, settled_request

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def settled(make_policy: Any, row_registry: Any, now: datetime) -> Settled:
    return settled_request(make_policy, now)


@pytest.fixture
def public(settings: Any) -> str:
    """RETENTION_SIGNING_KEY set; its public key, base64."""
    seed, public = new_key()
    settings.RETENTION_SIGNING_KEY = seed
    return public


@pytest.fixture
def files(settled: Settled, public: str, now: datetime, tmp_path: Path) -> dict[str, Any]:
    """What a tenant saved: the certificate, the key, a receipt of a photo, a row's receipt."""
    doc = erasure_certificate_issue(settled.request, now=now + timedelta(days=3))
    photo, account = settled.events[0], settled.events[3]
    row = key_digest(f"accounts.closed:{settled.account.pk}")
    return {
        "doc": doc,
        "cert": save(tmp_path / "certificate.json", doc),
        "key": save(tmp_path / "key.json", {"algorithm": "Ed25519", "public_key": public}),
        "receipt": save(tmp_path / "receipt.json", receipt_for(photo)),
        "row": save(tmp_path / "row.json", receipt_for(account, row=row)),
        "public": public,
    }


def save(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value))
    return str(path)


def verify(*args: str) -> tuple[int, str]:
    """``main`` as the command runs it: its exit status and what it printed."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = main(["verify", *args])
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue()


def test_certificate__verifies_offline_with_its_key_and_the_tenants_receipts(files, tmp_path):
    doc = files["doc"]

    # No Django settings, no database: the command a tenant runs.
    done = subprocess.run(
        [sys.executable, "-m", "retention.receipts", "verify", files["cert"]]
        + ["--public-key", files["key"], "--receipts", files["receipt"], files["row"]],
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == (
        f"VERIFIED: erasure request {doc['id']} partially completed (certificate issued "
        f"{doc['issued_at']}, signed by key {doc['key_id']}): of 6 items of this subject, "
        f"3 erased, 1 redacted, 1 kept under a hold, 0 left; 5 events, root "
        f"{doc['events']['root'][:16]}…, chain head batch 3; 2 receipt(s) among its events.\n"
    )


def test_certificate__receipts_of_a_page_of_the_deletions_api_are_among_its_events(
    files, client, settings, tmp_path
):
    settings.RETENTION_HMAC_KEYS = "k1:" + "a" * 40
    cache.clear()
    _, secret = tenant_key_create(tenant_id="acme")
    page = client.get("/api/v1/deletions/", headers={"Authorization": f"Api-Key {secret}"}).json()
    runs = files["doc"]["events"]["runs"]
    ours = {**page, "results": [r for r in page["results"] if r["run_id"] in runs]}
    assert len(ours["results"]) == 3  # two photos deleted, Ann's account

    assert verify(files["cert"], "--receipts", save(tmp_path / "page.json", ours))[0] == 0

    # The whole page also holds another run's receipt, which is not the request's.
    code, out = verify(files["cert"], "--receipts", save(tmp_path / "all.json", page))
    (other,) = [r for r in page["results"] if r["run_id"] not in runs]
    assert code == 1
    assert out == (
        f"NOT VERIFIED: receipt {other['id']}: its event {other['event_hash']} is not among "
        "the certificate's events\n"
    )


def _flip_count(doc: dict[str, Any]) -> None:
    doc["classes"][0]["erased"] += 1


def _flip_total(doc: dict[str, Any]) -> None:
    doc["totals"]["erased"] -= 1


def _change_time(doc: dict[str, Any]) -> None:
    doc["completed_at"] = doc["completed_at"].replace("2026-03-16", "2026-03-15")


def _remove_class(doc: dict[str, Any]) -> None:
    doc["classes"] = [c for c in doc["classes"] if c["data_class"] != "billing.invoice"]


def _drop_leaf(doc: dict[str, Any]) -> None:
    doc["events"]["leaves"].pop()


def _other_subject(doc: dict[str, Any]) -> None:
    doc["subject_digest"] = "0" * 64


def _completed(doc: dict[str, Any]) -> None:
    doc["state"] = "completed"


CHANGES: list[Callable[[dict[str, Any]], None]] = [
    _flip_count,
    _flip_total,
    _change_time,
    _remove_class,
    _drop_leaf,
    _other_subject,
    _completed,
]


@pytest.mark.parametrize("change", CHANGES, ids=lambda f: f.__name__.strip("_"))
def test_certificate__any_change_fails_offline_even_with_its_hash_recomputed(
    files, tmp_path, change
):
    changed = json.loads(json.dumps(files["doc"]))
    change(changed)
    as_edited = save(tmp_path / "edited.json", changed)
    changed["hash"] = certificate_hash(changed)
    rehashed = save(tmp_path / "rehashed.json", changed)

    code, out = verify(as_edited)
    assert (code, out) == (
        1,
        "NOT VERIFIED: its content does not hash to its hash: the certificate was changed\n",
    )
    code, out = verify(rehashed, "--public-key", files["key"])
    assert code == 1
    assert out.startswith("NOT VERIFIED: ")


def test_certificate__flipped_count_fails_offline(files, tmp_path):
    changed = json.loads(json.dumps(files["doc"]))
    _flip_count(changed)
    del changed["signature"], changed["key_id"]
    changed["hash"] = certificate_hash(changed)

    # Unsigned and re-hashed, its counts still give it away.
    code, out = verify(save(tmp_path / "forged.json", changed))

    assert code == 1
    assert out == (
        "NOT VERIFIED: class accounts.closed: 2 erased, 0 redacted and 0 kept are more than "
        "the 1 items its scope found\n"
        "NOT VERIFIED: totals say 3 erased, its classes add up to 4\n"
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_flip_total, "NOT VERIFIED: totals say 2 erased, its classes add up to 3\n"),
        (
            _remove_class,
            "NOT VERIFIED: totals say 6 found, its classes add up to 5\n",
        ),
        (
            _drop_leaf,
            "NOT VERIFIED: events: it counts 5 events and lists 4 leaves\n",
        ),
        (
            _completed,
            "NOT VERIFIED: completed, yet items are kept under a hold or left\n",
        ),
    ],
    ids=["flipped_total", "removed_class", "dropped_leaf", "completed"],
)
def test_certificate__an_unsigned_forgery_fails_on_its_own_consistency(
    files, tmp_path, change, expected
):
    changed = json.loads(json.dumps(files["doc"]))
    change(changed)
    del changed["signature"], changed["key_id"]
    changed["hash"] = certificate_hash(changed)

    assert verify(save(tmp_path / "forged.json", changed)) == (1, expected)


def test_certificate__changed_time_fails_on_its_signature(files, tmp_path):
    changed = json.loads(json.dumps(files["doc"]))
    _change_time(changed)
    changed["hash"] = certificate_hash(changed)

    code, out = verify(save(tmp_path / "forged.json", changed), "--public-key", files["public"])

    assert (code, out) == (
        1,
        "NOT VERIFIED: bad signature: the certificate is not what the key signed\n",
    )


def test_certificate__signed_by_another_key_or_unsigned_fails_with_a_key(files, tmp_path):
    _, stranger = new_key()
    code, out = verify(files["cert"], "--public-key", stranger)
    assert code == 1
    assert out.startswith(f"NOT VERIFIED: signed by key {files['doc']['key_id']}, which is not")

    unsigned = {k: v for k, v in files["doc"].items() if k not in ("key_id", "signature")}
    code, out = verify(save(tmp_path / "unsigned.json", unsigned), "--public-key", files["key"])
    assert (code, out) == (
        1,
        "NOT VERIFIED: it is not signed, and a public key was given to check its signature with\n",
    )
    # Without a key it verifies, and says it is unsigned.
    code, out = verify(save(tmp_path / "unsigned.json", unsigned))
    assert code == 0
    assert "(certificate issued " in out and ", unsigned): " in out


def test_certificate__a_tampered_receipt_fails(files, tmp_path):
    receipt = json.loads(Path(files["receipt"]).read_text())
    receipt["event"]["outcome"] = "already_absent"

    code, out = verify(files["cert"], "--receipts", save(tmp_path / "forged-receipt.json", receipt))

    assert (code, out) == (
        1,
        "NOT VERIFIED: a receipt: the event's fields do not hash to its event_hash\n",
    )


def test_certificate__receipts_need_its_leaves_listed(settled, files, now, tmp_path, monkeypatch):
    monkeypatch.setattr(issuing, "LEAVES_LISTED_MAX", 4)
    monkeypatch.setattr(checking, "LEAVES_LISTED_MAX", 4)
    doc = erasure_certificate_issue(settled.request, now=now + timedelta(days=3))
    cert = save(tmp_path / "large.json", doc)

    assert verify(cert, "--public-key", files["key"])[0] == 0
    code, out = verify(cert, "--receipts", files["receipt"])
    assert (code, out) == (
        1,
        "NOT VERIFIED: a receipt: the certificate lists no leaves (5 events, more than 4), "
        "so receipts cannot be checked against it offline\n",
    )


def test_certificate__unreadable_input_exits_2(files, tmp_path):
    (tmp_path / "broken.json").write_text('{"format": ')

    assert verify(str(tmp_path / "absent.json"))[0] == 2
    code, out = verify(str(tmp_path / "broken.json"))
    assert code == 2
    assert out.startswith("cannot read input: ")
    assert verify(files["cert"], "--receipts", str(tmp_path / "absent.json"))[0] == 2
    assert verify(files["cert"], "--public-key", base64.b64encode(b"short").decode())[0] == 2


def test_certificate__a_receipt_alone_or_mixed_options_are_usage_errors(files, tmp_path):
    code, out = verify(files["receipt"])
    assert code == 2
    assert "is a receipt: verify it with its chain head file" in out

    code, out = verify(files["receipt"], files["cert"], "--receipts", files["row"])
    assert code == 2
    assert "--receipts goes with an erasure certificate alone" in out

    code, out = verify(files["cert"], "--signed-head", files["cert"], "--public-key", "x")
    assert code == 2
    assert "--signed-head goes with a receipt and its chain head file" in out
