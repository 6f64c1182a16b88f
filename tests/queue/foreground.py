"""A stand-in for a host's foreground job, run by the test's qcluster.

It writes when it was enqueued and when a worker started it, so a test can
see whether retention batches let it through.
"""

from __future__ import annotations

import json
import time
from pathlib import Path


def mark(path: str, enqueued_at: float) -> None:
    Path(path).write_text(json.dumps({"enqueued": enqueued_at, "started": time.time()}))
