"""The app installs into a brand-new Django project with only the documented steps.

The wheel is built from this checkout and installed into a fresh virtualenv;
``django-admin startproject`` makes the host, and the blocks of
docs/install.md marked ``<!-- step: NAME -->`` are applied to it word for
word: Python blocks appended to settings.py or urls.py, or run in
``manage.py shell``; shell blocks run line by line with the virtualenv first
on PATH. The one substitution: ``django-lethe`` in a pip line names the
freshly built wheel instead of the package index.

One virtualenv serves two hosts. First with the core alone (no DRF in the
virtualenv at all) and the admin; then, with the ``api`` extra added, an
API-only host without ``django.contrib.admin``. Each tracks a file on the
filesystem storage, dry-runs, enforces, and sees the file gone and counted.
(SPEC §5; issue 13.)
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.install

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "install.md"
STEP = re.compile(r"<!-- step: ([\w-]+) -->\n```(\w+)\n(.*?)\n```", re.S)
SCRATCH = Path("demo/acme/scratch.txt")

# What the host's own code reads after the documented steps, in manage.py shell.
OUTCOME = """
import json
from django.core.files.storage import default_storage
from retention.models import RetentionRecord, Run
record = RetentionRecord.objects.get()
runs = [
    {"mode": r.mode, "status": r.status, **r.counts()}
    for r in Run.objects.order_by("started_at")
]
print(json.dumps({"state": record.state, "exists": default_storage.exists(record.object_key),
                  "runs": runs}))
"""

RECEIPTS = """
import json, os
from django.test import Client
client = Client(HTTP_HOST="localhost")
key = {"Authorization": f"Api-Key {os.environ['TENANT_KEY']}"}
receipts = client.get("/api/v1/deletions/", headers=key)
schema = client.get("/api/v1/schema/")
print(json.dumps({"status": receipts.status_code, "body": receipts.json(),
                  "schema": schema.status_code}))
"""


def doc_steps() -> dict[str, tuple[str, str]]:
    steps: dict[str, tuple[str, str]] = {}
    for name, language, body in STEP.findall(DOC.read_text()):
        assert name not in steps, f"step {name!r} appears twice in {DOC.name}"
        steps[name] = (language, body)
    return steps


class Host:
    """A project made by ``django-admin startproject``, driven as its owner would."""

    def __init__(self, venv: Path, parent: Path, name: str) -> None:
        self.venv = venv
        self.name = name
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("DJANGO_", "PYTHON", "VIRTUAL_ENV", "RETENTION_"))
            and key not in {"DATABASE_URL", "REDIS_URL"}
        }
        self.env["PATH"] = f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"
        self.env["RETENTION_DIGEST_KEY"] = "install-test-digest-key-0123456789abcdef"
        run(["django-admin", "startproject", name], cwd=parent, env=self.env)
        self.root = parent / name
        self.settings = self.root / name / "settings.py"
        self.urls = self.root / name / "urls.py"

    def append(self, path: Path, code: str) -> None:
        path.write_text(f"{path.read_text()}\n{code}\n")

    def sh(self, block: str) -> list[str]:
        outputs = []
        for line in block.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                outputs.append(run(["bash", "-c", line], cwd=self.root, env=self.env))
        return outputs

    def manage(self, *args: str, **env: str) -> str:
        return run(["python", "manage.py", *args], cwd=self.root, env={**self.env, **env})

    def shell(self, code: str, **env: str) -> str:
        return self.manage("shell", "-c", code, **env)

    def qcluster_starts_and_stops(self, block: str) -> None:
        """Start ``qcluster`` as documented, wait until it runs, stop it with one SIGINT."""
        process = subprocess.Popen(
            shlex.split(block.strip()),
            cwd=self.root,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: list[str] = []
        started = threading.Event()

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line)
                if "running" in line.lower():
                    started.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            assert started.wait(90), f"qcluster did not start:\n{''.join(lines)}"
        finally:
            # One SIGINT to the main process only (NOTES: a second, or one to
            # the process group, can deadlock django-q2's shutdown).
            process.send_signal(signal.SIGINT)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                pytest.fail(f"qcluster did not stop on SIGINT:\n{''.join(lines)}")
        reader.join(5)
        assert process.stdout is not None
        process.stdout.close()
        output = "".join(lines)
        assert "Traceback" not in output, output


def run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (
        f"{shlex.join(str(a) for a in args)} exited {result.returncode} in {cwd}:\n"
        f"{result.stdout}\n{result.stderr}"
    )
    return result.stdout + result.stderr


def pip_line(line: str, wheel: Path) -> str:
    """The documented pip line, with ``django-lethe`` naming the built wheel."""
    replaced, count = re.subn(
        r'"?django-lethe(\[[\w,]+\])?"?',
        lambda m: shlex.quote(f"django-lethe{m[1] or ''} @ {wheel.as_uri()}"),
        line,
    )
    assert count == 1, f"no django-lethe requirement in {line!r}"
    return replaced


@pytest.fixture(scope="module")
def steps() -> dict[str, tuple[str, str]]:
    return doc_steps()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy of what the wheel is made of: an in-tree build would
    # leave build/ and *.egg-info in the checkout.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(
        REPO / "retention", source / "retention", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = tmp_path_factory.mktemp("wheel")
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out), str(source)],
        cwd=source,
    )
    (built,) = out.glob("django_lethe-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("venv") / "venv"
    run([sys.executable, "-m", "venv", str(path)], cwd=path.parent)
    return path


def install(venv: Path, block: str, wheel: Path) -> None:
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    for line in block.splitlines():
        if line.strip():
            run(["bash", "-c", pip_line(line, wheel)], cwd=venv, env=env)


def first_deletion(host: Host, steps: dict[str, tuple[str, str]]) -> dict[str, object]:
    """Section 4 of the doc: policy and file, dry run, enforcement, enforcing run."""
    host.shell(steps["first-policy"][1])
    assert (host.root / SCRATCH).read_bytes() == b"delete me"
    dry_run = "\n".join(host.sh(steps["dry-run"][1]))
    assert "would delete" in dry_run
    assert (host.root / SCRATCH).exists()
    host.shell(steps["enable-enforcement"][1])
    host.sh(steps["enforce"][1])
    outcome: dict[str, object] = json.loads(host.shell(OUTCOME).strip().splitlines()[-1])
    assert not (host.root / SCRATCH).exists()
    return outcome


def assert_deleted_and_counted(outcome: dict[str, object]) -> None:
    assert outcome["state"] == "deleted"
    assert outcome["exists"] is False
    dry, enforce = outcome["runs"]  # type: ignore[misc]
    assert (dry["mode"], dry["status"], dry["eligible"], dry["deleted"]) == (
        "dry_run",
        "finished",
        1,
        0,
    )
    assert (enforce["mode"], enforce["status"], enforce["eligible"], enforce["deleted"]) == (
        "enforce",
        "finished",
        1,
        1,
    )


@pytest.fixture(scope="module")
def core_venv(venv: Path, wheel: Path, steps: dict[str, tuple[str, str]]) -> Iterator[Path]:
    install(venv, steps["install-core"][1], wheel)
    yield venv


def test_docs__name_every_step_the_install_test_applies(steps):
    assert set(steps) == {
        "install-core",
        "install-api",
        "settings-core",
        "settings-api",
        "urls-core",
        "urls-api",
        "migrate",
        "qcluster",
        "first-policy",
        "dry-run",
        "enable-enforcement",
        "enforce",
        "tenant-key",
    }
    assert {language for language, _ in steps.values()} == {"sh", "python"}


def test_fresh_project__core_only_with_the_admin(core_venv, tmp_path, steps):
    freeze = run([str(core_venv / "bin" / "python"), "-m", "pip", "freeze"], cwd=tmp_path)
    assert "djangorestframework" not in freeze.lower()  # the core alone, no DRF at all
    host = Host(core_venv, tmp_path, "plainhost")
    host.append(host.settings, steps["settings-core"][1])
    host.append(host.urls, steps["urls-core"][1])

    check = host.manage("check")
    host.sh(steps["migrate"][1])
    outcome = first_deletion(host, steps)

    assert "System check identified no issues" in check  # retention.W001 included
    assert_deleted_and_counted(outcome)


def test_fresh_project__api_only_without_the_admin(core_venv, wheel, tmp_path, steps):
    install(core_venv, steps["install-api"][1], wheel)
    host = Host(core_venv, tmp_path, "apihost")
    host.append(host.settings, steps["settings-core"][1])
    host.append(host.settings, steps["settings-api"][1])
    # The host's own choice, not a documented step: no admin at all.
    host.append(host.settings, 'INSTALLED_APPS.remove("django.contrib.admin")')
    host.urls.write_text("from django.urls import path\n\nurlpatterns = []\n")
    host.append(host.urls, steps["urls-core"][1])
    host.append(host.urls, steps["urls-api"][1])

    check = host.manage("check")
    host.sh(steps["migrate"][1])
    host.qcluster_starts_and_stops(steps["qcluster"][1])
    outcome = first_deletion(host, steps)
    (created,) = host.sh(steps["tenant-key"][1])
    secret = created.splitlines()[1].strip()
    receipts = json.loads(host.shell(RECEIPTS, TENANT_KEY=secret).strip().splitlines()[-1])

    assert "System check identified no issues" in check
    assert_deleted_and_counted(outcome)
    assert (receipts["status"], receipts["schema"]) == (200, 200), receipts
    assert [r["outcome"] for r in receipts["body"]["results"]] == ["deleted"]
