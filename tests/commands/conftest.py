"""The private PostgreSQL cluster of the outage tests here: one per module, migrated once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.subprocesses import PrivatePostgres, private_postgres


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivatePostgres]:
    with private_postgres() as running:
        yield running
