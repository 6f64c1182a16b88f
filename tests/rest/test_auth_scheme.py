"""A tenant request without an API key is told which scheme to use (issue 30, point 4).

DRF's own answer, "Authentication credentials were not provided.", left a
caller sending ``Authorization: Bearer <key>`` guessing.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db

EXPECTED = "tenant endpoints expect `Authorization: Api-Key <key>`"


def refused(client: Any, headers: dict[str, str]) -> dict[str, Any]:
    response = client.get("/api/v1/deletions/", headers=headers)
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response["WWW-Authenticate"] == "Api-Key"
    body: dict[str, Any] = response.json()
    assert body["code"] == "not_authenticated"
    return body


def test_auth__a_bearer_key_is_told_the_api_key_scheme_and_never_echoed(
    client: Any, acme: dict[str, str]
) -> None:
    secret = acme["Authorization"].removeprefix("Api-Key ")

    body = refused(client, {"Authorization": f"Bearer {secret}"})

    assert body["detail"] == (
        "The Authorization header uses the Bearer scheme; tenant endpoints expect "
        "`Authorization: Api-Key <key>`."
    )
    assert secret not in body["detail"]
    assert secret.split(".", 1)[0] not in body["detail"]


@pytest.mark.parametrize(
    ("header", "start"),
    [
        ({}, "No credentials were provided"),
        ({"Authorization": "   "}, "No credentials were provided"),
        ({"Authorization": "Token abc"}, "The Authorization header uses the Token scheme"),
        ({"Authorization": "Basic YWxpY2U6cHc="}, "The Authorization header uses the Basic"),
        ({"Authorization": "Api-Key"}, "The Authorization header holds no key"),
        ({"Authorization": "Be(arer) x"}, "The Authorization header uses another scheme"),
    ],
)
def test_auth__any_other_scheme_or_none_names_the_expected_one(
    client: Any, header: dict[str, str], start: str
) -> None:
    body = refused(client, header)

    assert body["detail"].startswith(start)
    assert EXPECTED in body["detail"]


def test_auth__the_control_plane_keeps_its_own_signature_answer(client: Any) -> None:
    response = client.post(
        "/api/v1/runs/", data={"mode": "dry_run"}, headers={"Authorization": "Bearer x"}
    )

    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Lethe-HMAC-SHA256"
    assert response.json()["code"] == "signature_missing"


def test_auth__a_good_key_still_reads_and_a_wrong_one_is_invalid(
    client: Any, acme: dict[str, str]
) -> None:
    assert client.get("/api/v1/deletions/", headers=acme).status_code == 200
    wrong = client.get(
        "/api/v1/deletions/", headers={"Authorization": "Api-Key nosuchpr.0123456789abcdef"}
    )
    assert (wrong.status_code, wrong.json()["code"]) == (401, "api_key_invalid")
