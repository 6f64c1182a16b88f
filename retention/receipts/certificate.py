"""An erasure request's certificate: its format, its hash, and checking it offline.

The server issues it (``retention.chain.erasure_certificate``) when a request
completes or partially completes; a tenant, an auditor or the data subject
checks it here, with neither Django nor a database (see the package):

- its own consistency: the hash is that of its content, per class the counts
  fit what the class does on erasure and never exceed what the frozen scope
  found, the totals are the classes' sums, the state fits what was kept, the
  times are in order, and the events' Merkle root is that of its listed leaves;
- its Ed25519 signature, with the key ``GET /api/v1/deletions/chain/key/`` serves;
- that the tenant's receipts are of its events: each receipt's proof holds,
  and its leaf is one of the certificate's leaves.

The certificate lists its events' leaves (SHA-256 hex, in chain order) when
there are at most ``LEAVES_LISTED_MAX`` of them; beyond that it carries only
their count and root, and receipts cannot be checked against it offline.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from retention.receipts import evidence
from retention.receipts.signed_heads import AnchorError, canonical, ed25519_module, key_id
from retention.receipts.verify import verify_receipt

FORMAT = "lethe-erasure-certificate-v1"
# About 67 bytes a leaf in JSON: at most ~67 KB of leaves in a certificate.
LEAVES_LISTED_MAX = 1000
# Not part of what ``hash`` covers; the signature covers everything but itself.
UNHASHED = ("hash", "key_id", "signature")
TIMES = ("received_at", "approved_at", "due_at", "completed_at", "verified_at", "issued_at")
NULLABLE_TIMES = ("completed_at", "verified_at")
MEMBERS = frozenset(
    {"format", "id", "subject_digest", "tenant_id", "state", *TIMES, "classes", "totals"}
    | {"events", *UNHASHED}
)
STATES = ("completed", "partially_completed")
ACTIONS = ("delete", "redact", "keep")
COUNTS = ("found", "erased", "redacted", "kept", "left")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$")
EMPTY_ROOT = hashlib.sha256(b"").hexdigest()


def certificate_hash(doc: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of everything but ``hash``, ``key_id`` and
    ``signature``: the same whether or not the certificate is signed."""
    hashed = {name: value for name, value in doc.items() if name not in UNHASHED}
    return hashlib.sha256(canonical(hashed)).hexdigest()


def signed_bytes(doc: Mapping[str, Any]) -> bytes:
    """What the signature covers: the canonical JSON of every member but ``signature``."""
    return canonical({k: v for k, v in doc.items() if k != "signature"})


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _instant(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def certificate_problems(doc: Any) -> list[str]:
    """What is wrong with the certificate on its own (no key, no receipts); [] if nothing."""
    if not isinstance(doc, Mapping):
        return ["not a JSON object"]
    if doc.get("format") != FORMAT:
        return [f"format {doc.get('format')!r} is not {FORMAT!r}: not an erasure certificate"]
    missing = sorted(MEMBERS - {*UNHASHED[1:]} - set(doc))
    if missing:
        return [f"missing {', '.join(missing)}"]
    extra = sorted(set(doc) - MEMBERS)
    if extra:
        return [f"unknown member(s) {', '.join(extra)}"]
    if doc["hash"] != certificate_hash(doc):
        return ["its content does not hash to its hash: the certificate was changed"]
    problems: list[str] = []
    try:
        problems += [*_subject_problems(doc), *_time_problems(doc)]
        totals, class_problems = _classes_problems(doc["classes"])
        problems += [*class_problems, *_totals_problems(doc, totals)]
        problems += _events_problems(doc["events"])
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        return [*problems, f"malformed certificate: {type(exc).__name__} {exc}"]
    return problems


def _subject_problems(doc: Mapping[str, Any]) -> list[str]:
    problems = []
    subject, tenant = doc["subject_digest"], doc["tenant_id"]
    if subject is not None and not (isinstance(subject, str) and _HEX64.match(subject)):
        problems.append("subject_digest is not a SHA-256 digest in lower-case hex")
    if tenant is not None and not (isinstance(tenant, str) and tenant):
        problems.append("tenant_id is not a non-empty string")
    if subject is None and tenant is None:
        problems.append("it names neither a subject nor a tenant")
    if not isinstance(doc["id"], str) or not doc["id"]:
        problems.append("id is not a string")
    if doc["state"] not in STATES:
        problems.append(f"state {doc['state']!r} is not one of {', '.join(STATES)}")
    return problems


def _time_problems(doc: Mapping[str, Any]) -> list[str]:
    at: dict[str, datetime] = {}
    for name in TIMES:
        value = doc[name]
        if value is None and name in NULLABLE_TIMES:
            continue
        if not isinstance(value, str) or not _TIME.match(value):
            return [f"{name} is not an RFC 3339 UTC time ending in Z: {value!r}"]
        at[name] = _instant(value)
    order = [
        ("received_at", "approved_at"),
        ("approved_at", "completed_at"),
        ("approved_at", "verified_at"),
        ("completed_at", "issued_at"),
        ("verified_at", "issued_at"),
        ("approved_at", "issued_at"),
    ]
    problems = [
        f"{first} ({doc[first]}) is after {then} ({doc[then]})"
        for first, then in order
        if first in at and then in at and at[first] > at[then]
    ]
    if at["due_at"] <= at["received_at"]:
        problems.append(f"due_at ({doc['due_at']}) is not after received_at")
    return problems


def _classes_problems(classes: Any) -> tuple[dict[str, int], list[str]]:
    """The sums of the classes' counts, and what is wrong with each class."""
    totals = dict.fromkeys(COUNTS, 0)
    if not isinstance(classes, list):
        return totals, ["classes is not a list"]
    names = [entry["data_class"] for entry in classes]
    if names != sorted(set(names)):
        return totals, ["classes are not listed once each, by name"]
    problems: list[str] = []
    for entry in classes:
        holds = entry["kept"] if isinstance(entry["kept"], list) else []
        kept = sum(h["count"] for h in holds if _count(h["count"]))
        problems += [f"class {entry['data_class']}: {p}" for p in _class_problems(entry, kept)]
        for name in ("found", "erased", "redacted", "left"):
            totals[name] += entry[name] if _count(entry[name]) else 0
        totals["kept"] += kept
    return totals, problems


def _class_problems(entry: Mapping[str, Any], kept: int) -> list[str]:
    counts = [name for name in ("found", "erased", "redacted", "left") if not _count(entry[name])]
    if counts:
        return [f"{', '.join(counts)} not a count"]
    holds = entry["kept"]
    if not isinstance(holds, list) or not all(
        isinstance(h, Mapping)
        and _count(h["hold"])
        and _count(h["count"])
        and h["count"] > 0
        and isinstance(h["reason"], str)
        for h in holds
    ):
        return ["kept is not a list of holds, each with its reason and a count"]
    found, erased, redacted, left = (entry[n] for n in ("found", "erased", "redacted", "left"))
    basis, action = entry["basis"], entry["on_erasure"]
    if not entry["reachable"]:
        if not entry["not_reachable_because"]:
            return ["not reachable, and it does not say why"]
        if found or erased or redacted or left or holds or entry["verified"] is not None:
            return ["not reachable, yet it counts items or says they were verified"]
        return []
    problems = []
    if entry["not_reachable_because"] or not isinstance(entry["verified"], bool):
        problems.append("reachable, yet it says why not, or not whether it was verified")
    if action not in ACTIONS:
        problems.append(f"on_erasure {action!r} is not one of {', '.join(ACTIONS)}")
    if (action == "delete" and redacted) or (action == "redact" and erased):
        problems.append(
            f"on_erasure is {action}, yet it counts {erased} erased, {redacted} redacted"
        )
    if action == "keep" and (erased or redacted or not basis):
        problems.append("on_erasure is keep: nothing is erased or redacted, and a basis says why")
    if action != "keep" and basis:
        problems.append(f"on_erasure is {action}, yet it gives a legal basis for keeping")
    if erased + redacted + kept > found:
        problems.append(
            f"{erased} erased, {redacted} redacted and {kept} kept are more than the "
            f"{found} items its scope found"
        )
    return problems


def _totals_problems(doc: Mapping[str, Any], totals: Mapping[str, int]) -> list[str]:
    given = doc["totals"]
    if not isinstance(given, Mapping) or set(given) != set(COUNTS):
        return [f"totals are not the counts {', '.join(COUNTS)}"]
    problems = [
        f"totals say {given[name]} {name}, its classes add up to {totals[name]}"
        for name in COUNTS
        if given[name] != totals[name]
    ]
    if doc["state"] == "completed" and (totals["kept"] or totals["left"]):
        problems.append("completed, yet items are kept under a hold or left")
    if doc["state"] == "partially_completed" and not (totals["kept"] or totals["left"]):
        problems.append("partially completed, yet nothing is kept under a hold or left")
    return problems


def _events_problems(events: Mapping[str, Any]) -> list[str]:
    count, root, leaves, head = events["count"], events["root"], events["leaves"], events["head"]
    problems = []
    if not _count(count):
        return ["events: count is not a count"]
    if not isinstance(root, str) or not _HEX64.match(root):
        return ["events: root is not a SHA-256 digest in lower-case hex"]
    if not _count(head["seq"]) or not _HEX64.match(str(head["chain"])):
        problems.append("events: head is not a batch seq and its chain hash")
    if count and not head["seq"]:
        problems.append("events: it counts events, but its chain head is before any batch")
    if not isinstance(events["runs"], list) or not all(isinstance(r, str) for r in events["runs"]):
        problems.append("events: runs is not a list of run ids")
    if leaves is None:
        if count <= LEAVES_LISTED_MAX:
            problems.append(f"events: {count} leaves are few enough to list, and none are")
        return problems
    if not isinstance(leaves, list) or not all(
        isinstance(leaf, str) and _HEX64.match(leaf) for leaf in leaves
    ):
        return [*problems, "events: leaves are not SHA-256 digests in lower-case hex"]
    if len(leaves) != count:
        problems.append(f"events: it counts {count} events and lists {len(leaves)} leaves")
    elif evidence.merkle_root([bytes.fromhex(leaf) for leaf in leaves]).hex() != root:
        problems.append("events: the listed leaves do not give its root")
    return problems


def signature_problems(doc: Mapping[str, Any], public_key: bytes | None) -> list[str]:
    """With a key: whether that key signed the certificate. Without: nothing to check."""
    signed = "signature" in doc or "key_id" in doc
    if signed and not ("signature" in doc and "key_id" in doc):
        return ["it has a key_id or a signature, not both"]
    if public_key is None:
        return []
    if not signed:
        return ["it is not signed, and a public key was given to check its signature with"]
    given = key_id(public_key)
    if doc["key_id"] != given:
        return [f"signed by key {doc['key_id']}, which is not the key given ({given})"]
    try:
        signature = base64.b64decode(str(doc["signature"]), validate=True)
        ed25519 = ed25519_module()
    except (binascii.Error, ValueError) as exc:
        return [f"bad signature ({exc})"]
    except AnchorError as exc:
        return [f"cannot check the signature: {exc}"]
    from cryptography.exceptions import InvalidSignature

    try:
        ed25519.Ed25519PublicKey.from_public_bytes(public_key).verify(signature, signed_bytes(doc))
    except InvalidSignature:
        return ["bad signature: the certificate is not what the key signed"]
    return []


def receipt_items(value: Any) -> list[Mapping[str, Any]]:
    """The receipts in a file a tenant saved: one receipt (``.../receipt/``), a page of
    ``GET /api/v1/deletions/`` (its ``results``), or a list of either."""
    if isinstance(value, Mapping) and "results" in value:
        value = value["results"]
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(item, Mapping) for item in items):
        raise ValueError("not a receipt, a page of receipts or a list of them")
    return items


def receipt_problems(doc: Mapping[str, Any], receipt: Mapping[str, Any]) -> list[str]:
    """Whether one receipt's proof holds and its event is one of the certificate's."""
    name = f"receipt {receipt['id']}" if "id" in receipt else "a receipt"
    try:
        if "event" in receipt:  # the full receipt: its fields hash to its leaf
            link = receipt["batch"]
            problems = verify_receipt(
                dict(receipt), {"head": {"seq": link["seq"], "chain": link["chain"]}}
            )
            if problems:
                return [f"{name}: {problems[0]}"]
            event_hash = evidence.leaf_hash(receipt["event"]).hex()
        else:  # a receipt of the list: its hash, and its proof to its batch
            proof, event_hash = receipt["proof"], receipt["event_hash"]
            link = proof["batch"]
            path = [bytes.fromhex(node) for node in proof["path"]]
            root = evidence.root_from_path(
                bytes.fromhex(event_hash), int(proof["leaf_index"]), int(link["size"]), path
            )
            chain = evidence.chain_hash(
                bytes.fromhex(link["previous_chain"]), int(link["seq"]), int(link["size"]), root
            )
            if root.hex() != link["root"] or chain.hex() != link["chain"]:
                return [f"{name}: its proof does not give its batch's root and chain hash"]
    except (KeyError, TypeError, ValueError) as exc:
        return [f"{name}: malformed receipt: {type(exc).__name__} {exc}"]
    events = doc["events"]
    if events["leaves"] is None:
        return [
            f"{name}: the certificate lists no leaves ({events['count']} events, more than "
            f"{LEAVES_LISTED_MAX}), so receipts cannot be checked against it offline"
        ]
    if event_hash not in events["leaves"]:
        return [f"{name}: its event {event_hash} is not among the certificate's events"]
    head = events["head"]
    if int(link["seq"]) > head["seq"] or (
        int(link["seq"]) == head["seq"] and link["chain"] != head["chain"]
    ):
        return [f"{name}: its batch {link['seq']} is not on the chain up to the certificate's head"]
    return []


def certificate_summary(doc: Mapping[str, Any], *, key_checked: bool, receipts: int) -> str:
    """The one line that says what a good certificate certifies."""
    t = doc["totals"]
    whom = "this subject" if doc["subject_digest"] else f"tenant {doc['tenant_id']}"
    if doc["tenant_id"] and doc["subject_digest"]:
        whom = f"this subject in tenant {doc['tenant_id']}"
    if not t["found"]:
        what = f"nothing of {whom} was found"
    else:
        what = (
            f"of {t['found']} items of {whom}, {t['erased']} erased, {t['redacted']} redacted, "
            f"{t['kept']} kept under a hold, {t['left']} left"
        )
    events = doc["events"]
    signed = "unsigned"
    if "key_id" in doc:
        signed = f"signed by key {doc['key_id']}" + ("" if key_checked else " (not checked)")
    checked = f"; {receipts} receipt(s) among its events" if receipts else ""
    return (
        f"erasure request {doc['id']} {doc['state'].replace('_', ' ')} "
        f"(certificate issued {doc['issued_at']}, {signed}): {what}; "
        f"{events['count']} events, root {events['root'][:16]}…, "
        f"chain head batch {events['head']['seq']}{checked}."
    )


def certificate_check(
    doc: Any, *, public_key: bytes | None, receipts: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Every problem with the certificate, its signature and the receipts; [] if none."""
    problems = certificate_problems(doc)
    if problems:
        return problems
    problems = signature_problems(doc, public_key)
    for receipt in receipts:
        problems += receipt_problems(doc, receipt)
    return problems
