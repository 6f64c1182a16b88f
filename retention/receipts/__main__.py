"""``python -m retention.receipts``: the offline verifier's command (see ``cli``)."""

from __future__ import annotations

import sys

from retention.receipts.cli import main

# Guarded: importing every module (tests/test_imports.py) must not run the command.
if __name__ == "__main__":
    sys.exit(main())
