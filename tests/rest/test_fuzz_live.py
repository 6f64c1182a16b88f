"""The API fuzzed from outside: schemathesis against a live server, every check.

A real HTTP server (pytest-django's ``live_server``, on the test database)
answers schemathesis's engine, which runs every phase (examples, coverage,
fuzzing and stateful sequences) with every built-in check, plus one of ours:
a tenant's key never sees another tenant's ids. Tenant endpoints carry a real
tenant API key; the control plane is signed with a real HMAC key per request.
Bounded and seeded so CI stays within its budget.
"""

from __future__ import annotations

import json
import time
from base64 import b64decode
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import requests
import schemathesis
from django.core.files.base import ContentFile
from django.utils.dateparse import parse_datetime
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import Status, events, from_schema

from retention.models import DeletionEvent, EventOutcome
from retention.rest import signing
from retention.rest.services import tenant_key_create
from tests.anchoring.helpers import new_key
from tests.rest.conftest import HMAC_KEYS
from uploads.models import Upload
from uploads.services import upload_create

pytestmark = [pytest.mark.django_db(transaction=True)]

SEED = 26
MAX_EXAMPLES = 15
BUDGET_SECONDS = 120
# schemathesis's own defaults for positive_data_acceptance.
POSITIVE_EXPECTED = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]

# Ids the fuzzing tenant must never see: filled by the test, read by the check.
FOREIGN: dict[str, set[Any]] = {"receipts": set(), "records": set(), "uploads": set()}


class CrossTenantLeak(AssertionError):
    pass


@schemathesis.check
def no_cross_tenant_ids(ctx: Any, response: Any, case: Any) -> bool | None:
    """A tenant's key never reads another tenant's receipts, records or uploads."""
    if not FOREIGN["receipts"] or response.status_code != 200 or case.method.upper() != "GET":
        return None
    path = case.operation.path
    params = {name: str(value) for name, value in (case.path_parameters or {}).items()}
    receipt = params.get("receipt_id", "")
    if receipt.isdigit() and int(receipt) in FOREIGN["receipts"]:
        raise CrossTenantLeak(f"another tenant's receipt {receipt} answered 200 on {path}")
    if path == "/api/v1/uploads/{id}/retention/" and params.get("id") in FOREIGN["uploads"]:
        raise CrossTenantLeak(f"another tenant's upload {params['id']} answered 200")
    if path == "/api/v1/deletions/" and "json" in response.headers.get("Content-Type", [""])[0]:
        for receipt in json.loads(response.content).get("results", []):
            if receipt["id"] in FOREIGN["receipts"] or receipt["record_id"] in FOREIGN["records"]:
                raise CrossTenantLeak(f"another tenant's receipt {receipt['id']} listed")
    if path == "/api/v1/deletions/report/":
        tenant = json.loads(response.content).get("tenant_id")
        if tenant != "acme":
            raise CrossTenantLeak(f"report of tenant {tenant!r}")
    return None


class HmacSigner(requests.auth.AuthBase):
    """Signs each prepared request as an operator would: method, path, timestamp, body."""

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        body = request.body or b""
        if isinstance(body, str):
            body = body.encode()
        request.headers.update(
            signing.signed_headers(
                key_id="ops-2026a",
                secret=HMAC_KEYS["ops-2026a"],
                method=request.method or "GET",
                path=unquote(urlsplit(request.url or "").path),
                body=body,
            )
        )
        return request


@pytest.fixture
def foreign_ids() -> Iterator[dict[str, set[Any]]]:
    yield FOREIGN
    for ids in FOREIGN.values():
        ids.clear()


def _issued_cursor(value: Any) -> bool:
    """Whether ``value`` has the shape of a cursor the API writes (base64 of o/r/p)."""
    try:
        text = b64decode(str(value).encode("ascii"), validate=True).decode("ascii")
        tokens = parse_qs(text, strict_parsing=True)
    except ValueError:
        return False
    return bool(tokens) and set(tokens) <= {"o", "r", "p"}


def map_case(context: Any, case: Any) -> Any:
    """Positive cases keep to the rules the schema states in words: `until` later
    than `since`, and a cursor only as a link gave it. Negative cases go as drawn."""
    if case.meta is None or not case.meta.generation.mode.is_positive or not case.query:
        return case
    query = dict(case.query)
    if "cursor" in query and not _issued_cursor(query["cursor"]):
        del query["cursor"]
    since, until = query.get("since"), query.get("until")
    if since and until:
        try:
            if parse_datetime(str(since)) >= parse_datetime(str(until)):  # type: ignore[operator]
                del query["until"]
        except (TypeError, ValueError):
            pass
    case.query = query
    return case


def _config(base_url: str) -> SchemathesisConfig:
    return SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "base-url": base_url,
            "workers": 1,
            "generation": {
                "mode": "all",
                "max-examples": MAX_EXAMPLES,
                "deterministic": True,
                "database": "none",
                # Credentials come from the auth providers below, never generated.
                "with-security-parameters": False,
            },
            "phases": {
                "examples": {"enabled": True},
                "coverage": {"enabled": True},
                "fuzzing": {"enabled": True},
                "stateful": {"enabled": True, "max-steps": 6},
            },
            "checks": {"enabled": True},
            "operations": [
                {
                    # Valid by the schema, refused by rules it cannot hold: a file's
                    # bytes must be an allowed type for its data class, a run
                    # names data classes that exist (400 `bad_arguments`), and a
                    # subject has one open erasure request at a time.
                    "include-name": [
                        "POST /api/v1/uploads/",
                        "POST /api/v1/runs/",
                        "POST /api/v1/erasures/",
                    ],
                    "checks": {
                        "positive_data_acceptance": {
                            "expected-statuses": [*POSITIVE_EXPECTED, "400"]
                        }
                    },
                }
            ],
        }
    )


def test_fuzz__every_check_from_outside_no_5xx_no_leak_no_schema_violation(
    live_server, settings, deleted_records, foreign_ids, capsys
):
    settings.RETENTION_SIGNING_KEY = new_key()[0]  # the key endpoint answers 200
    deleted_records({"acme": 3, "globex": 2})
    deleted_records({"acme": 1, "globex": 1}, data_class="pod.scan")
    for tenant in ("acme", "globex"):
        upload_create(
            tenant_id=tenant,
            data_class="idv.photo",
            file=ContentFile(b"\xff\xd8\xff" + b"0" * 64),
        )
    foreign = DeletionEvent.objects.filter(
        tenant_id="globex", outcome__in=[EventOutcome.DELETED, EventOutcome.ALREADY_ABSENT]
    )
    foreign_ids["receipts"].update(foreign.values_list("id", flat=True))
    foreign_ids["records"].update(foreign.values_list("record_id", flat=True))
    foreign_ids["uploads"].update(
        str(pk) for pk in Upload.objects.filter(tenant_id="globex").values_list("id", flat=True)
    )
    _, acme_key = tenant_key_create(tenant_id="acme")

    schema = schemathesis.openapi.from_url(
        f"{live_server.url}/api/v1/schema/?format=json", config=_config(live_server.url)
    )

    class TenantKey:
        def get(self, case: Any, ctx: Any) -> str:
            return acme_key

        def set(self, case: Any, data: str, ctx: Any) -> None:
            case.headers = {**(case.headers or {}), "Authorization": f"Api-Key {data}"}

    schema.auth(refresh_interval=None).apply_to(
        path_regex=r"^/api/v1/(deletions|erasures|uploads)"
    )(TenantKey)
    schema.auth.set_from_requests(HmacSigner()).apply_to(path_regex=r"^/api/v1/runs/")
    schema.hook(map_case)

    failures: list[str] = []
    requests_sent = 0
    phases: set[str] = set()
    answered: set[tuple[str, int]] = set()
    started = time.monotonic()
    for event in from_schema(schema).execute():
        if isinstance(event, events.FatalError):
            raise event.exception
        if isinstance(event, events.NonFatalError):
            failures.append(f"error: {event.label}: {event.info.format()}")
        if isinstance(event, events.ScenarioFinished | events.FuzzScenarioFinished):
            recorder = event.recorder
            requests_sent += len(recorder.interactions)
            for case_id, interaction in recorder.interactions.items():
                node = recorder.cases.get(case_id)
                if node is not None and interaction.response is not None:
                    answered.add((node.value.operation.label, interaction.response.status_code))
            if isinstance(event, events.ScenarioFinished):
                phases.add(str(event.phase))
            for case_id, checks in recorder.checks.items():
                for check in checks:
                    if check.status == Status.FAILURE:
                        interaction = recorder.interactions.get(case_id)
                        sent = (
                            f"{interaction.request.method} {interaction.request.uri}"
                            if interaction
                            else ""
                        )
                        info = check.failure_info
                        failure = f"{info.failure.title} {info.failure.message}" if info else ""
                        failures.append(f"{check.name}: {recorder.label}: {sent}: {failure}")
    elapsed = time.monotonic() - started

    with capsys.disabled():
        print(
            f"\nschemathesis (live): {requests_sent} requests, phases {sorted(phases)}, "
            f"{elapsed:.1f} s, {len(failures)} failures"
        )
    assert not failures, "\n".join(failures)
    # The credentials worked: signed runs were accepted and followed, receipts read.
    assert ("POST /api/v1/runs/", 202) in answered
    assert ("GET /api/v1/runs/{run_id}/", 200) in answered
    assert ("GET /api/v1/deletions/", 200) in answered
    assert ("GET /api/v1/deletions/{receipt_id}/receipt/", 200) in answered
    assert not {s for _label, s in answered if s >= 500}
    assert requests_sent >= 300
    assert elapsed < BUDGET_SECONDS
