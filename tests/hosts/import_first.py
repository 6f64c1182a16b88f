"""Import each named module first, in a process of its own, two at a time.

Run as ``python tests/hosts/import_first.py MODULE...`` with
DJANGO_SETTINGS_MODULE set; prints a JSON object of the modules that failed,
each with the last line of its error, and exits 0.

This process runs ``django.setup()`` once for its host, then forks a child per
module that imports that module and nothing else. ``django.setup()`` is what
any host runs before its first import of ours, and it does the same thing
every time, so each child sees what a new interpreter would see after it: the
apps, and the modules their configs and models import, but no other module of
``retention``. Setting Django up once instead of once per module is most of the
time a child used to take. If Django cannot be set up at all, that is reported
with its whole traceback, so the module it failed in is named.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings

import django

WORKERS = 2
# The key under which a failure of django.setup() itself is reported.
SETUP = "django.setup()"


def _child(module: str, write_end: int) -> None:
    error = ""
    try:
        __import__(module)
    except BaseException:
        error = traceback.format_exc().strip().splitlines()[-1]
    os.write(write_end, error.encode())
    os._exit(0)


def main(modules: list[str]) -> dict[str, str]:
    sys.path.insert(0, os.getcwd())
    # A warning while setting up or importing is an error, as in the suite.
    warnings.simplefilter("error")
    try:
        django.setup()
    except BaseException:
        return {SETUP: traceback.format_exc().strip()}
    running: dict[int, tuple[str, int]] = {}
    failed: dict[str, str] = {}
    pending = list(reversed(modules))
    while pending or running:
        while pending and len(running) < WORKERS:
            module = pending.pop()
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read_end)
                _child(module, write_end)
            os.close(write_end)
            running[pid] = (module, read_end)
        pid, status = os.wait()
        module, read_end = running.pop(pid)
        with os.fdopen(read_end, "rb") as pipe:
            error = pipe.read().decode()
        if error or status:
            failed[module] = error or f"exit status {status}"
    return failed


if __name__ == "__main__":
    report = os.dup(1)
    os.dup2(2, 1)  # what setting up or an import prints stays out of the JSON
    with os.fdopen(report, "w") as out:
        json.dump(main(sys.argv[1:]), out)
