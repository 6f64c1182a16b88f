"""Every module of ``retention`` imports first, each in a process of its own.

One interpreter per host sets Django up, then forks a process per module that
imports that module alone (tests/hosts/import_first.py): each sees what a host
sees at its first import of it, the apps set up and no other module of
``retention`` but those the apps themselves load. Setting Django up once per
host rather than once per module keeps the test well under a minute. Under a
host without ``django.contrib.admin`` nothing imports the admin for us, so an
import cycle that admin autodiscovery happens to hide shows up; under a host
without DRF, a core module that needs DRF does. (Issues 13, 27.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "retention"
IMPORT_FIRST = REPO / "tests" / "hosts" / "import_first.py"

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


def _import_each_first(modules: list[str], host: str) -> dict[str, str]:
    """Failed modules and their errors; see tests/hosts/import_first.py."""
    result = subprocess.run(
        [sys.executable, str(IMPORT_FIRST), *modules],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": host},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    failed: dict[str, str] = json.loads(result.stdout)
    return failed


def test_retention_modules__are_found_without_importing_them():
    modules = retention_modules()

    assert {"retention", "retention.models", "retention.admin", "retention.rest.deletions"} <= set(
        modules
    )
    assert not [m for m in modules if "migrations" in m]


@pytest.mark.parametrize("host", sorted(NOT_APPLICABLE))
def test_every_module__imports_first_in_a_fresh_interpreter(host):
    modules = [m for m in retention_modules() if not _in(m, NOT_APPLICABLE[host])]

    failed = _import_each_first(modules, host)

    assert failed == {}, "\n".join(f"{m}: {e}" for m, e in failed.items())
