"""GET /api/v1/deletions/chain/key/: the public key that signs anchored chain heads."""

from __future__ import annotations

import base64
import hashlib

import pytest

from tests.anchoring.helpers import new_key

pytestmark = pytest.mark.django_db
URL = "/api/v1/deletions/chain/key/"


def test_chain_key__answers_the_public_key_its_id_and_algorithm(client, acme, settings):
    seed, public = new_key()
    settings.RETENTION_SIGNING_KEY = seed

    response = client.get(URL, headers=acme)

    assert response.status_code == 200
    raw = base64.b64decode(public)
    assert response.json() == {
        "algorithm": "Ed25519",
        "key_id": hashlib.sha256(raw).hexdigest()[:16],
        "public_key": public,
    }
    assert seed not in response.content.decode()


def test_chain_key__404_while_no_signing_key_is_configured(client, acme, settings):
    settings.RETENTION_SIGNING_KEY = ""

    response = client.get(URL, headers=acme)

    assert response.status_code == 404
    assert response.json() == {
        "code": "not_found",
        "detail": "No signing key is configured: chain heads are not signed.",
    }


def test_chain_key__needs_a_tenant_api_key(client, settings):
    settings.RETENTION_SIGNING_KEY = new_key()[0]

    response = client.get(URL)

    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_chain_key__unknown_query_parameters_are_refused(client, acme, settings):
    settings.RETENTION_SIGNING_KEY = new_key()[0]

    response = client.get(URL + "?format=json&key=other", headers=acme)

    assert response.status_code == 400
    assert response.json()["field_errors"] == {"key": ["Unknown query parameter."]}
