"""The REST error table's bodies are what the API answers (issue 30, point 4).

docs/rest-api.md shows, under "Error bodies", one request and its JSON body
per status; each request is sent here and its body compared with the page's,
so the documented format cannot drift from the real one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache

pytestmark = pytest.mark.django_db

PAGE = Path(__file__).resolve().parents[2] / "docs" / "rest-api.md"


def documented_bodies() -> dict[str, dict[str, Any]]:
    """The section's JSON bodies by their ``code``."""
    text = PAGE.read_text()
    section = text.split("### Error bodies", 1)[1].split("\n## ", 1)[0]
    bodies = [json.loads(block) for block in re.findall(r"```json\n(.*?)\n```", section, re.S)]
    return {body["code"]: body for body in bodies}


def erasure_post(client: Any, headers: dict[str, str], body: str, content_type: str) -> Any:
    return client.post("/api/v1/erasures/", data=body, content_type=content_type, headers=headers)


def throttled(client: Any, headers: dict[str, str], settings: Any) -> Any:
    settings.RETENTION_API_THROTTLE_RATE = "1/min"
    cache.clear()
    assert client.get("/api/v1/deletions/", headers=headers).status_code == 200
    return client.get("/api/v1/deletions/", headers=headers)


Request = Callable[[Any, dict[str, str], Any], Any]

REQUESTS: dict[str, tuple[int, dict[str, str], Request]] = {
    "invalid": (400, {}, lambda c, h, s: c.get("/api/v1/deletions/?page_size=0", headers=h)),
    "parse_error": (400, {}, lambda c, h, s: erasure_post(c, h, "{bad", "application/json")),
    "not_authenticated": (
        401,
        {"WWW-Authenticate": "Api-Key"},
        lambda c, h, s: c.get("/api/v1/deletions/", headers={"Authorization": "Bearer k.s"}),
    ),
    "not_found": (
        404,
        {},
        lambda c, h, s: c.get("/api/v1/deletions/123456/receipt/", headers=h),
    ),
    "method_not_allowed": (
        405,
        {"Allow": "GET, HEAD, OPTIONS"},
        lambda c, h, s: c.delete("/api/v1/deletions/", headers=h),
    ),
    "not_acceptable": (406, {}, lambda c, h, s: c.get("/api/v1/deletions/?format=xml", headers=h)),
    "request_too_large": (
        413,
        {},
        lambda c, h, s: erasure_post(
            c, h, json.dumps({"subject_id": "x" * 2_700_000, "reason": "r"}), "application/json"
        ),
    ),
    "unsupported_media_type": (
        415,
        {},
        lambda c, h, s: erasure_post(c, h, "subject_id=1", "application/x-www-form-urlencoded"),
    ),
    "throttled": (429, {"Retry-After": "60"}, throttled),
}


def test_error_bodies__the_page_shows_a_body_for_each_status_of_the_table() -> None:
    assert sorted(documented_bodies()) == sorted(REQUESTS)
    table = PAGE.read_text().split("**Errors**", 1)[1].split("### Error bodies", 1)[0]
    for status, _, _ in REQUESTS.values():
        assert f"\n| {status} |" in table


@pytest.mark.parametrize("code", sorted(REQUESTS))
def test_error_bodies__each_documented_body_is_what_the_api_answers(
    client: Any, acme: dict[str, str], settings: Any, code: str
) -> None:
    status, headers, send = REQUESTS[code]

    response = send(client, acme, settings)

    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    assert response.json() == documented_bodies()[code]
    for name, value in headers.items():
        assert response[name] == value
