"""Import each named module first, in a process of its own, two at a time.

Run as ``python tests/hosts/import_first.py MODULE...`` with
DJANGO_SETTINGS_MODULE set; prints a JSON object of the modules that failed,
each with the last line of its error, and exits 0.

Each module gets a child forked from this process before Django is set up:
the child runs ``django.setup()`` and imports its module, so nothing of
``retention`` nor any app was imported before it. The parent loads only
Django's own framework modules, which read no settings, so a child starts in
a third of the time of a new interpreter.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import warnings

import django
import django.core.checks
import django.core.management
import django.db.models
import django.forms
import django.http
import django.template
import django.urls

WORKERS = 2


def _child(module: str, write_end: int) -> None:
    os.dup2(2, 1)  # whatever the import prints stays out of the parent's JSON
    error = ""
    try:
        warnings.simplefilter("error")
        django.setup()
        __import__(module)
    except BaseException:
        error = traceback.format_exc().strip().splitlines()[-1]
    os.write(write_end, error.encode())
    os._exit(0)


def main(modules: list[str]) -> dict[str, str]:
    sys.path.insert(0, os.getcwd())
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
    print(json.dumps(main(sys.argv[1:])))
