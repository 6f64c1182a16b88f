"""Every module of ``retention`` imports first, each in a fresh interpreter.

Under a host without ``django.contrib.admin`` nothing imports the admin for
us, so an import cycle that admin autodiscovery happens to hide shows up;
under a host without DRF, a core module that needs DRF does. (Issue 13.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "retention"
IMPORT_FIRST = "import importlib, sys, django; django.setup(); importlib.import_module(sys.argv[1])"

# Optional sub-apps a host of that kind does not install: their modules are
# not expected to import there.
NOT_APPLICABLE: dict[str, tuple[str, ...]] = {
    # Admin modules register on admin.site, which needs the admin app.
    "tests.hosts.noadmin": ("retention.admin", "retention.rest.admin"),
    "tests.hosts.nodrf": ("retention.rest",),
}


def retention_modules() -> list[str]:
    modules = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        if "migrations" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules.append(".".join(parts))
    return modules


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(f"{p}.") for p in packages)


def _import_first(module: str, settings: str) -> str | None:
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", IMPORT_FIRST, module],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": settings},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode == 0:
        return None
    lines = result.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {result.returncode}"


def test_retention_modules__are_found_without_importing_them():
    modules = retention_modules()

    assert {"retention", "retention.models", "retention.admin", "retention.rest.apis"} <= set(
        modules
    )
    assert not [m for m in modules if "migrations" in m]


@pytest.mark.parametrize("host", sorted(NOT_APPLICABLE))
def test_every_module__imports_first_in_a_fresh_interpreter(host):
    modules = [m for m in retention_modules() if not _in(m, NOT_APPLICABLE[host])]

    with ThreadPoolExecutor(max_workers=2) as pool:
        errors = list(pool.map(lambda m: _import_first(m, host), modules))

    failed = {m: e for m, e in zip(modules, errors, strict=True) if e}
    assert failed == {}, "\n".join(f"{m}: {e}" for m, e in failed.items())
