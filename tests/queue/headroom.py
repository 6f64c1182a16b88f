"""A foreground signal a test switches from outside the qcluster: over budget
while the file named by LETHE_TEST_BUSY_FILE exists, within budget once it is gone."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from retention.engine.guard import GuardReading


def busy_while_file(*, now: datetime) -> GuardReading:
    busy = Path(os.environ["LETHE_TEST_BUSY_FILE"]).exists()
    return GuardReading(
        over_budget=busy,
        value=None,
        budget=None,
        detail="test foreground busy" if busy else "test foreground idle",
    )
