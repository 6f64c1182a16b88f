"""The offline verifier runs in a bare interpreter: Python, cryptography, nothing of ours.

A tenant runs ``python -m retention.receipts`` without Django, a database or
the rest of the app. The import contract in pyproject.toml reads the source;
this runs it. The package is copied alone (with ``retention/__init__.py``)
beside ``cryptography`` and what it requires, into a directory that is the
interpreter's only path beside the standard library (``-I -S``: no
site-packages, no PYTHONPATH, no current directory). An erasure
certificate is checked the same way. Every module of the
package is imported before the command runs, so a module that imports
Django, or any other module of ``retention``, fails here even where the
command does not reach it.
"""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from retention.chain.erasure_certificate import erasure_certificate_issue
from retention.models import DeletionEvent, EventOutcome
from retention.selectors.evidence import chain_head, receipt_for
from tests.anchoring.helpers import new_key
from tests.certificates import settled_request
from tests.helpers import enforce, put_tracked

REPO = Path(__file__).resolve().parents[2]
# Run by the bare interpreter: its first argument is the only directory added
# to the standard library's path; then every module of the package is imported,
# and the command runs with the remaining arguments.
BOOT = """
import importlib, pkgutil, runpy, sys
sys.path.insert(0, sys.argv.pop(1))
import retention.receipts as package
for module in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
    if module.name != package.__name__ + ".__main__":
        importlib.import_module(module.name)
runpy.run_module(package.__name__, run_name="__main__", alter_sys=True)
"""

Bare = Callable[..., subprocess.CompletedProcess[str]]


def _top_level_names(distribution: str) -> set[str]:
    """What ``distribution`` and the distributions it requires put on the path."""
    names: set[str] = set()
    todo, seen = [distribution], set()
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        dist = importlib.metadata.distribution(name)
        for file in dist.files or ():
            top = file.parts[0]
            if top not in ("..", "__pycache__") and not top.endswith(".dist-info"):
                names.add(str(dist.locate_file(top)))
        for line in dist.requires or ():
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return names


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Bare:
    """``bare(*args, cwd=...)``: ``python -m retention.receipts *args`` on a tenant's machine."""
    path = tmp_path_factory.mktemp("tenant") / "path"
    (path / "retention").mkdir(parents=True)
    shutil.copy(REPO / "retention" / "__init__.py", path / "retention")
    shutil.copytree(
        REPO / "retention" / "receipts",
        path / "retention" / "receipts",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for name in _top_level_names("cryptography"):
        (path / Path(name).name).symlink_to(name)

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-I", "-S", "-c", BOOT, str(path), *args],
            cwd=cwd,
            env={"PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )

    # The interpreter is bare: Django and the rest of the app are out of reach.
    for module in ("django", "retention.selectors"):
        probe = subprocess.run(
            [
                sys.executable,
                "-I",
                "-S",
                "-c",
                f"import sys; sys.path.insert(0, {str(path)!r}); import {module}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert f"No module named '{module}'" in probe.stderr, probe.stderr
    return run


@pytest.fixture
def anchored(
    make_policy: Any,
    now: Any,
    settings: Any,
    tmp_path: Path,
    django_capture_on_commit_callbacks: Any,
) -> tuple[DeletionEvent, Path, str]:
    """A deletion anchored by the app: its event, the signed head, the public key."""
    seed, public = new_key()
    settings.RETENTION_SIGNING_KEY = seed
    settings.RETENTION_EVIDENCE_ANCHOR = str(tmp_path / "anchors")
    make_policy(batch_size=1)
    put_tracked(now=now - timedelta(days=31))
    with django_capture_on_commit_callbacks(execute=True):
        enforce(now=now)
    event = DeletionEvent.objects.get(outcome=EventOutcome.DELETED)
    (anchor,) = sorted((tmp_path / "anchors").glob("heads/*.json"))
    return event, anchor, public


def _change_one_byte(path: Path, after: str) -> None:
    """Change the character just after ``after`` in a file the tenant saved."""
    text = path.read_text()
    at = text.index(after) + len(after)
    path.write_text(text[:at] + ("1" if text[at] == "0" else "0") + text[at + 1 :])


@pytest.mark.django_db
def test_bare__a_receipt_and_its_signed_head_verify_and_one_changed_byte_does_not(
    anchored, bare, tmp_path
):
    event, anchor, public = anchored
    receipt = receipt_for(event)
    (tmp_path / "receipt.json").write_text(json.dumps(receipt))
    (tmp_path / "chain-head.json").write_text(json.dumps(chain_head(from_seq=event.batch.seq)))
    shutil.copy(anchor, tmp_path / "signed-head.json")
    (tmp_path / "key.json").write_text(json.dumps({"algorithm": "Ed25519", "public_key": public}))
    args = ("verify", "receipt.json", "chain-head.json")
    signed = ("--signed-head", "signed-head.json", "--public-key", "key.json")

    ok = bare(*args, *signed, cwd=tmp_path)

    assert ok.returncode == 0, ok.stdout + ok.stderr
    head = json.loads(anchor.read_text())
    assert ok.stdout.splitlines() == [
        f"VERIFIED: record {event.record_id} deleted at {receipt['event']['occurred_at']} "
        f"is event {receipt['leaf_index']} of batch {event.batch.seq}, "
        f"chained to head batch {head['seq']}.",
        f"VERIFIED: the head of batch {head['seq']} was signed by key {head['key_id']} "
        f"at {head['anchored_at']}; the receipt's chain passes through it.",
    ]

    # Another year of deletion: the event's fields no longer hash to its event_hash.
    _change_one_byte(tmp_path / "receipt.json", '"occurred_at": "')
    forged = bare(*args, cwd=tmp_path)
    assert forged.returncode == 1, forged.stdout + forged.stderr
    assert forged.stdout == "NOT VERIFIED: the event's fields do not hash to its event_hash\n"


@pytest.mark.django_db
def test_bare__a_signed_head_with_one_changed_byte_is_not_verified(anchored, bare, tmp_path):
    _event, anchor, public = anchored
    shutil.copy(anchor, tmp_path / "signed-head.json")
    head = json.loads(anchor.read_text())

    ok = bare("verify-head", "signed-head.json", "--public-key", public, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr

    _change_one_byte(tmp_path / "signed-head.json", '"chain":"')
    forged = bare("verify-head", "signed-head.json", "--public-key", public, cwd=tmp_path)
    assert forged.returncode == 1, forged.stdout + forged.stderr
    assert forged.stdout == (
        f"NOT VERIFIED: the signed head of batch {head['seq']}: bad signature: "
        "the statement is not what the key signed\n"
    )


@pytest.mark.django_db
def test_bare__an_erasure_certificate_and_its_receipt_verify_and_one_changed_byte_does_not(
    bare, make_policy, row_registry, now, settings, tmp_path
):
    seed, public = new_key()
    settings.RETENTION_SIGNING_KEY = seed
    settled = settled_request(make_policy, now)
    doc = erasure_certificate_issue(settled.request, now=now + timedelta(days=3))
    (tmp_path / "certificate.json").write_text(json.dumps(doc))
    (tmp_path / "receipt.json").write_text(json.dumps(receipt_for(settled.events[0])))
    args = ("verify", "certificate.json", "--public-key", public, "--receipts", "receipt.json")

    ok = bare(*args, cwd=tmp_path)

    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith(f"VERIFIED: erasure request {doc['id']} partially completed")

    # Another day of completion: its content no longer hashes to its hash.
    _change_one_byte(tmp_path / "certificate.json", '"completed_at": "2026-03-1')
    forged = bare(*args, cwd=tmp_path)
    assert forged.returncode == 1, forged.stdout + forged.stderr
    assert forged.stdout == (
        "NOT VERIFIED: its content does not hash to its hash: the certificate was changed\n"
    )
