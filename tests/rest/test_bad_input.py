"""Bad input over REST answers a documented 4xx with the JSON error body, never a 500
or Django's HTML error page (issue 26, point 5)."""

from __future__ import annotations

import csv
import io
import json
from base64 import b64encode
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import StreamingHttpResponse
from django.utils import timezone

from retention.models import Run
from retention.rest import signing
from tests.rest.conftest import HMAC_KEYS
from tests.subprocesses import example_setting

pytestmark = pytest.mark.django_db


# Every endpoint of the API, with a method it answers.
ENDPOINTS = [
    ("get", "/api/v1/deletions/"),
    ("get", "/api/v1/deletions/report/"),
    ("get", "/api/v1/deletions/chain/"),
    ("get", "/api/v1/deletions/chain/key/"),
    ("get", "/api/v1/deletions/1/receipt/"),
    ("get", "/api/v1/deletions/1/rows/"),
    ("post", "/api/v1/runs/"),
    ("get", "/api/v1/runs/00000000-0000-0000-0000-000000000000/"),
    ("post", "/api/v1/uploads/"),
    ("get", "/api/v1/uploads/1/retention/"),
]
TOO_MANY_PARAMS = "&".join(f"p{i}=1" for i in range(1001))


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["code"] == code
    assert body["detail"]
    return body


def signed_post(client, payload: dict | bytes, content_type: str = "application/json"):
    """A run trigger signed with a good key: ``payload`` as JSON, or bytes sent as they are."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = signing.signed_headers(
        key_id="ops-2026a",
        secret=HMAC_KEYS["ops-2026a"],
        method="POST",
        path="/api/v1/runs/",
        body=body,
        timestamp=int(timezone.now().timestamp()),
    )
    return client.post("/api/v1/runs/", data=body, content_type=content_type, headers=headers)


def csv_rows(response) -> list[dict[str, str]]:
    assert isinstance(response, StreamingHttpResponse)
    body = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(body)))


# -- more than 1,000 query parameters -----------------------------------------


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_bad_input__more_than_1000_query_parameters_is_a_json_400_without_a_key(
    client, method, path
):
    response = getattr(client, method)(f"{path}?{TOO_MANY_PARAMS}")

    body = assert_error(response, 400, "too_many_parameters")
    assert "1000" in body["detail"]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_bad_input__more_than_1000_query_parameters_is_a_json_400_with_a_key(
    client, acme, method, path
):
    response = getattr(client, method)(f"{path}?{TOO_MANY_PARAMS}", headers=acme)

    assert_error(response, 400, "too_many_parameters")


def test_bad_input__more_than_1000_query_parameters_is_no_500_even_with_debug_on(client, settings):
    # With DEBUG on, DRF's debug path read a renderer the request never got.
    settings.DEBUG = True

    response = client.get(f"/api/v1/deletions/?{TOO_MANY_PARAMS}")

    assert_error(response, 400, "too_many_parameters")


@pytest.mark.parametrize("debug", [False, True])
def test_bad_input__more_than_1000_query_parameters_on_the_schema_is_a_json_400(
    client, settings, debug
):
    settings.DEBUG = debug

    response = client.get(f"/api/v1/schema/?{TOO_MANY_PARAMS}")

    assert_error(response, 400, "too_many_parameters")


def test_bad_input__the_schema_is_still_served_in_each_format(client):
    assert client.get("/api/v1/schema/?format=json").json()["openapi"].startswith("3.")
    assert client.get("/api/v1/schema/").content.startswith(b"openapi: 3.")


# -- cursors ----------------------------------------------------------------


def test_bad_input__a_cursor_whose_position_is_not_an_integer_is_a_400(client, acme):
    # base64 of "p=abc": well formed, but no receipt id.
    response = client.get("/api/v1/deletions/?cursor=cD1hYmM%3D", headers=acme)

    assert_error(response, 400, "invalid_cursor")


@pytest.mark.parametrize(
    "cursor",
    [
        "",  # empty
        "!!!!",  # not base64
        "cD1",  # truncated base64
        b64encode(b"x=1").decode(),  # a token no cursor has
        b64encode(b"r=2&p=3").decode(),  # a direction that is neither 0 nor 1
        b64encode(b"o=-1&p=3").decode(),  # a negative offset
        b64encode(b"\xff\xfe").decode(),  # not text
    ],
)
def test_bad_input__an_empty_or_undecodable_cursor_is_a_400_not_the_first_page(
    client, acme, deleted_records, cursor
):
    deleted_records({"acme": 1})

    response = client.get("/api/v1/deletions/", {"cursor": cursor}, headers=acme)

    assert_error(response, 400, "invalid_cursor")


def test_bad_input__a_cursor_the_api_issued_still_works(client, acme, deleted_records):
    deleted_records({"acme": 3})

    first = client.get("/api/v1/deletions/?page_size=2", headers=acme).json()
    second = client.get(first["next"], headers=acme)

    assert second.status_code == 200
    assert len(second.json()["results"]) == 1
    previous = client.get(second.json()["previous"], headers=acme)
    assert [r["id"] for r in previous.json()["results"]] == [r["id"] for r in first["results"]]


# -- page_size --------------------------------------------------------------


@pytest.mark.parametrize("page_size", ["-1", "0", "1001", "1e20", "abc", ""])
def test_bad_input__a_page_size_outside_1_to_1000_is_a_400(client, acme, page_size):
    response = client.get("/api/v1/deletions/", {"page_size": page_size}, headers=acme)

    body = assert_error(response, 400, "invalid")
    assert list(body["field_errors"]) == ["page_size"]


@pytest.mark.parametrize("page_size", ["1", "1000"])
def test_bad_input__a_page_size_of_1_to_1000_is_accepted(client, acme, deleted_records, page_size):
    deleted_records({"acme": 2})

    response = client.get("/api/v1/deletions/", {"page_size": page_size}, headers=acme)

    assert response.status_code == 200
    assert len(response.json()["results"]) == min(2, int(page_size))


# -- CSV with cursor and page_size ------------------------------------------


def test_bad_input__csv_honours_page_size_and_cursor(client, acme, deleted_records):
    deleted_records({"acme": 3})
    ids = [r["id"] for r in client.get("/api/v1/deletions/", headers=acme).json()["results"]]

    first = client.get("/api/v1/deletions/?format=csv&page_size=2", headers=acme)

    assert first.status_code == 200
    assert [int(row["receipt_id"]) for row in csv_rows(first)] == ids[:2]
    next_url = first["Link"].split(";")[0].strip("<>")
    assert 'rel="next"' in first["Link"]
    query = parse_qs(urlsplit(next_url).query)
    assert query["format"] == ["csv"] and query["page_size"] == ["2"]
    second = client.get(next_url, headers=acme)
    assert [int(row["receipt_id"]) for row in csv_rows(second)] == ids[2:]
    assert 'rel="prev"' in second["Link"] and 'rel="next"' not in second["Link"]


def test_bad_input__csv_with_a_json_page_cursor_answers_the_same_rows(
    client, acme, deleted_records
):
    deleted_records({"acme": 3})
    page = client.get("/api/v1/deletions/?page_size=1", headers=acme).json()
    cursor = parse_qs(urlsplit(page["next"]).query)["cursor"][0]

    response = client.get(
        "/api/v1/deletions/", {"format": "csv", "cursor": cursor, "page_size": 1}, headers=acme
    )
    json_page = client.get(page["next"], headers=acme).json()

    assert [int(row["receipt_id"]) for row in csv_rows(response)] == [
        r["id"] for r in json_page["results"]
    ]


def test_bad_input__csv_with_a_bad_cursor_or_page_size_is_a_json_400(client, acme):
    bad_cursor = client.get("/api/v1/deletions/?format=csv&cursor=cD1hYmM%3D", headers=acme)
    bad_size = client.get("/api/v1/deletions/?format=csv&page_size=0", headers=acme)

    assert_error(bad_cursor, 400, "invalid_cursor")
    assert_error(bad_size, 400, "invalid")


def test_bad_input__csv_without_cursor_or_page_size_streams_every_receipt(
    client, acme, deleted_records
):
    deleted_records({"acme": 3})

    response = client.get("/api/v1/deletions/?format=csv", headers=acme)

    assert len(csv_rows(response)) == 3
    assert not response.has_header("Link")


# -- multipart limits --------------------------------------------------------


def test_bad_input__too_many_multipart_fields_is_a_json_400(client, acme, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 5
    data = {f"f{i}": "x" for i in range(10)}
    data["data_class"] = "idv.photo"
    data["file"] = SimpleUploadedFile("a.jpg", b"\xff\xd8\xff" + b"0" * 64)

    response = client.post("/api/v1/uploads/", data=data, headers=acme)

    assert_error(response, 400, "too_many_fields")


def test_bad_input__too_many_multipart_file_parts_is_a_json_400(client, acme, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 2
    files = [SimpleUploadedFile(f"{i}.jpg", b"\xff\xd8\xff" + b"0" * 64) for i in range(3)]

    response = client.post(
        "/api/v1/uploads/", data={"data_class": "idv.photo", "file": files}, headers=acme
    )

    assert_error(response, 400, "too_many_files")


def test_bad_input__a_body_over_the_memory_limit_is_a_json_413(client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100

    response = signed_post(client, {"mode": "dry_run", "tenant_id": "x" * 200})

    assert_error(response, 413, "request_too_large")


def test_bad_input__a_multipart_body_over_the_memory_limit_is_a_json_413(client, acme, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100

    response = client.post(
        "/api/v1/uploads/",
        data={
            "data_class": "x" * 200,
            "file": SimpleUploadedFile("a.jpg", b"\xff\xd8\xff" + b"0" * 64),
        },
        headers=acme,
    )

    assert_error(response, 413, "request_too_large")


# -- the rest of the error table ----------------------------------------------


def test_bad_input__an_unsupported_method_is_a_json_405(client, acme):
    response = client.delete("/api/v1/deletions/", headers=acme)

    assert_error(response, 405, "method_not_allowed")


def test_bad_input__a_signed_run_that_is_not_json_is_a_json_415(client):
    response = signed_post(
        client, b"mode=dry_run", content_type="application/x-www-form-urlencoded"
    )

    assert_error(response, 415, "unsupported_media_type")
    assert not Run.objects.exists()


# -- signed trigger body -----------------------------------------------------


def test_bad_input__a_signed_run_with_an_unknown_body_key_is_refused_and_runs_nothing(client):
    response = signed_post(client, {"mode": "dry_run", "x": 1})

    body = assert_error(response, 400, "invalid")
    assert body["field_errors"] == {"x": ["Unknown field."]}
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "payload",
    [
        {"mode": "dry_run", "tenant_id": 7},
        {"mode": "dry_run", "data_classes": [1]},
        {"mode": "dry_run", "limit": "5"},
        {"mode": "dry_run", "limit": True},
        {"mode": "dry_run", "max_seconds": "60"},
    ],
    ids=["tenant_id-number", "data_class-number", "limit-string", "limit-bool", "seconds-string"],
)
def test_bad_input__a_signed_run_with_a_value_of_the_wrong_json_type_is_a_400(client, payload):
    response = signed_post(client, payload)

    body = assert_error(response, 400, "invalid")
    assert set(body["field_errors"]) <= {"tenant_id", "data_classes.0", "limit", "max_seconds"}
    assert not Run.objects.exists()


def test_bad_input__a_signed_run_whose_body_is_not_an_object_is_a_400(client):
    response = signed_post(client, ["dry_run"])  # type: ignore[arg-type]

    assert_error(response, 400, "invalid")
    assert not Run.objects.exists()


# -- since and until ----------------------------------------------------------


@pytest.mark.parametrize("path", ["/api/v1/deletions/", "/api/v1/deletions/report/"])
@pytest.mark.parametrize(
    "until", ["2026-04-13T12:00:00Z", "2026-04-13T11:59:59Z"], ids=["equal", "earlier"]
)
def test_bad_input__until_not_later_than_since_is_a_400(client, acme, path, until):
    response = client.get(path, {"since": "2026-04-13T12:00:00Z", "until": until}, headers=acme)

    body = assert_error(response, 400, "invalid")
    assert body["field_errors"] == {"until": ["must be later than since."]}


def test_bad_input__until_one_second_after_since_is_accepted(client, acme, deleted_records):
    deleted_records({"acme": 1})

    response = client.get(
        "/api/v1/deletions/",
        {"since": "2026-04-13T12:00:00Z", "until": "2026-04-13T12:00:01Z"},
        headers=acme,
    )

    assert response.status_code == 200


# -- the schema states each rule ---------------------------------------------


@pytest.fixture
def schema(client) -> dict:
    return client.get("/api/v1/schema/?format=json").json()


def _query_params(schema: dict, path: str) -> dict[str, dict]:
    return {p["name"]: p for p in schema["paths"][path]["get"]["parameters"] if p["in"] == "query"}


def test_schema__states_page_size_limits_and_the_cursor(schema):
    params = _query_params(schema, "/api/v1/deletions/")

    assert params["page_size"]["schema"]["minimum"] == 1
    assert params["page_size"]["schema"]["maximum"] == 1000
    assert "cursor" in params and "next" in params["cursor"]["description"]
    assert "csv" in params["page_size"]["description"].lower()


@pytest.mark.parametrize("path", ["/api/v1/deletions/", "/api/v1/deletions/report/"])
def test_schema__states_the_since_until_rule(schema, path):
    until = _query_params(schema, path)["until"]

    assert "must be later than `since`" in until["description"]


def test_schema__the_run_request_admits_no_other_key(schema):
    run_start = schema["components"]["schemas"]["RunStartRequest"]

    assert run_start["additionalProperties"] is False


def test_schema__documents_413_where_a_body_is_read(schema):
    assert "413" in schema["paths"]["/api/v1/runs/"]["post"]["responses"]
    assert "413" in schema["paths"]["/api/v1/uploads/"]["post"]["responses"]


def test_schema__every_operation_documents_400_for_bad_query_strings(schema):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            assert "400" in operation["responses"], (method, path)


# -- the example project's DEBUG ---------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [(None, "False"), ("0", "False"), ("1", "True")])
def test_settings__debug_is_off_unless_django_debug_says_1(tmp_path, value, expected):
    assert example_setting("DEBUG", tmp_path, DJANGO_DEBUG=value) == expected


@pytest.mark.parametrize("mode", ["erase", "reconcile"])
def test_bad_input__a_run_is_a_dry_run_or_an_enforcing_sweep_nothing_else(client, mode):
    # An erase run exists only for an approved erasure request; a reconciliation is
    # retention_reconcile's. Neither is started here, and nothing is recorded.
    response = signed_post(client, {"mode": mode})

    assert_error(response, 400, "invalid")
    assert list(response.json()["field_errors"]) == ["mode"]
    assert not Run.objects.exists()
