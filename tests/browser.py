"""Where the browser tests find Chromium: Debian's package, never a download.

``playwright install`` cannot fetch browsers here; Playwright drives the
system's Chromium through its executable path instead.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_executable() -> str | None:
    """``LETHE_CHROMIUM`` when set, else Debian's ``chromium``; None when absent."""
    configured = os.environ.get("LETHE_CHROMIUM")
    if configured:
        return configured if os.path.exists(configured) else None
    if shutil.which("chromium"):
        return shutil.which("chromium")
    return "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None


def browser_missing() -> str | None:
    """Why browser tests cannot run here, or None when they can."""
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install -r requirements/test.txt)"
    if chromium_executable() is None:
        return "Chromium is not installed (apt-get install chromium)"
    return None
