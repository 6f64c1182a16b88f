"""Fixtures of the anchoring tests: a signing key, a directory store, runs that commit."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from retention.models import Run
from tests.anchoring.helpers import new_key
from tests.helpers import enforce


@pytest.fixture
def signing_key(settings: Any) -> str:
    """RETENTION_SIGNING_KEY set to a fresh key; returns its public key (base64)."""
    seed, public = new_key()
    settings.RETENTION_SIGNING_KEY = seed
    return public


@pytest.fixture
def anchor_dir(settings: Any, tmp_path: Path, signing_key: str) -> Path:
    """Anchoring on, into a directory."""
    path = tmp_path / "anchors"
    settings.RETENTION_EVIDENCE_ANCHOR = str(path)
    return path


@pytest.fixture
def committed(django_capture_on_commit_callbacks: Any) -> Callable[[Callable[[], Any]], Any]:
    """``committed(fn)``: call fn, then what it registered for after its commit (the anchor).

    The test's transaction never commits, so on_commit callbacks would never run.
    """

    def call(fn: Callable[[], Any]) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return fn()

    return call


@pytest.fixture
def anchored_run(committed: Callable[[Callable[[], Any]], Any]) -> Callable[..., Run]:
    """An enforcing run, anchored as it would be once its transaction committed."""

    def run(*, now: datetime, **kwargs: Any) -> Run:
        result: Run = committed(lambda: enforce(now=now, **kwargs))
        return result

    return run
