"""The OpenAPI schema: generated cleanly, served, honoured by every endpoint.

The schemathesis run drives the real WSGI application in-process, inside the
test's transaction, with seeded receipts, an upload and a tenant key. It is
bounded (a fixed number of examples per operation and mode, derandomized) so
it takes well under two minutes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from django.contrib.staticfiles import finders
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from schemathesis import GenerationMode

from config.wsgi import application
from tests.anchoring.helpers import new_key
from uploads.services import upload_create

pytestmark = pytest.mark.django_db

OPERATIONS = {
    ("POST", "/api/v1/erasures/"),
    ("GET", "/api/v1/erasures/{erasure_id}/"),
    ("GET", "/api/v1/erasures/{erasure_id}/certificate/"),
    ("GET", "/api/v1/deletions/"),
    ("GET", "/api/v1/deletions/report/"),
    ("GET", "/api/v1/deletions/chain/"),
    ("GET", "/api/v1/deletions/chain/key/"),
    ("GET", "/api/v1/deletions/{receipt_id}/receipt/"),
    ("GET", "/api/v1/deletions/{receipt_id}/rows/"),
    ("POST", "/api/v1/runs/"),
    ("GET", "/api/v1/runs/{run_id}/"),
    ("POST", "/api/v1/uploads/"),
    ("GET", "/api/v1/uploads/{id}/retention/"),
}
EXAMPLES = 60
CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_headers_conformance,
    schemathesis.checks.response_schema_conformance,
    schemathesis.checks.negative_data_rejection,
]


def test_schema__generates_valid_openapi_without_warnings(tmp_path: Path):
    out = tmp_path / "schema.yaml"

    # --fail-on-warn turns every drf-spectacular warning into a failure.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))

    text = out.read_text()
    for _, path in OPERATIONS:
        assert f"  {path}:" in text


def test_schema__served_with_every_operation(client):
    response = client.get("/api/v1/schema/?format=json")

    assert response.status_code == 200
    schema = response.json()
    served = {(method.upper(), path) for path, item in schema["paths"].items() for method in item}
    assert served == OPERATIONS
    assert set(schema["components"]["securitySchemes"]) == {
        "TenantApiKey",
        "LetheKeyId",
        "LetheTimestamp",
        "LetheSignature",
    }


def test_docs__swagger_ui_uses_bundled_assets_not_a_cdn(client):
    response = client.get("/api/v1/docs/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page
    assert "cdn" not in page.lower()
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")


@pytest.fixture
def same_connection() -> Iterator[None]:
    """Serve WSGI requests on the test's connection, as Django's test client does."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def test_schemathesis__no_server_errors_and_every_response_conforms(
    same_connection, acme, deleted_records, make_policy, capsys, settings
):
    settings.RETENTION_SIGNING_KEY = new_key()[0]  # the key endpoint answers 200
    deleted_records({"acme": 3, "globex": 2})
    deleted_records({"acme": 1}, data_class="pod.scan")
    upload = upload_create(
        tenant_id="acme", data_class="idv.photo", file=ContentFile(b"\xff\xd8\xff" + b"0" * 64)
    )
    schema = schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", application)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {(op.method.upper(), op.path) for op in operations} == OPERATIONS
    calls: dict[str, int] = {}

    def exercise(strategy: Any, label: str) -> None:
        @given(case=strategy)
        @hypothesis_settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: Any) -> None:
            case.call_and_validate(headers=acme, checks=CHECKS)
            calls[label] = calls.get(label, 0) + 1

        run()

    started = time.monotonic()
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            label = f"{operation.label} {mode}"
            exercise(operation.as_strategy(generation_mode=mode), label)
        if "{id}" in operation.path:
            exercise(
                operation.as_strategy(path_parameters={"id": str(upload.pk)}),
                f"{operation.label} (existing upload)",
            )
    elapsed = time.monotonic() - started

    with capsys.disabled():
        print(
            f"\nschemathesis: {sum(calls.values())} requests over {len(calls)} operation/mode "
            f"pairs in {elapsed:.1f} s"
        )
    assert len(calls) == 2 * len(OPERATIONS) + 1
    assert elapsed < 120
