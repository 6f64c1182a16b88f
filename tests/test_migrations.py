from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_migrations__models_and_committed_migrations_agree():
    out = StringIO()

    # --check exits non-zero (SystemExit) when a migration is missing.
    call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=StringIO())

    assert "No changes detected" in out.getvalue()
