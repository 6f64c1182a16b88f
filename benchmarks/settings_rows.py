"""Settings of ``benchmarks/rows.py``: the project's, with the tests' host models installed.

``tests.rowhost`` holds the host models a real project would register
(``RequestLog``, ``Account``); it is installed for the tests only
(``tests/settings.py``), and here, so the benchmark sweeps the same tables.
The benchmark's fresh database gets their tables from ``migrate``'s syncdb
(the app has no migrations).
"""

from __future__ import annotations

import os

from config.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.rowhost.apps.RowHostConfig"]  # noqa: F405

# A fixed key: redaction digests and event digests are computed as in production.
RETENTION_DIGEST_KEY = os.environ.get("RETENTION_DIGEST_KEY") or "lethe-bench-rows-digest-key"

# A million rows in one sweep, on purpose: no volume breaker.
RETENTION_BREAKER_ENABLED = False
