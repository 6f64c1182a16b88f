"""pytest plugin: a real S3-compatible server (moto in server mode) over HTTP.

Storage tests talk to an actual endpoint so that request encoding, error
parsing, retries and botocore event hooks behave as they do against S3. One
server per session; each test gets its own bucket. The server is never
skipped: if it cannot start, the session fails with its output.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from tests import motoserver
from tests.motoserver import AWS_ENV, AWS_ENV_REMOVED, DUMMY_CREDENTIALS, REGION, MotoServer


@pytest.fixture(scope="session", autouse=True)
def _aws_dummy_environment() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in AWS_ENV.items():
            patch.setenv(name, value)
        for name in AWS_ENV_REMOVED:
            patch.delenv(name, raising=False)
        yield


@pytest.fixture(scope="session")
def s3_server(
    _aws_dummy_environment: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MotoServer]:
    try:
        server = motoserver.start(tmp_path_factory.mktemp("moto") / "moto_server.log")
    except motoserver.MotoDidNotStart as exc:
        pytest.fail(str(exc))
    try:
        yield server
    finally:
        motoserver.stop(server)


S3ClientFactory = Callable[..., Any]


@pytest.fixture(scope="session")
def _boto3_session(_aws_dummy_environment: None) -> boto3.session.Session:
    # Clients of one session share its loaded service models: ~15 ms each
    # instead of ~200 ms.
    return boto3.session.Session()


@pytest.fixture
def s3_client_factory(
    s3_server: MotoServer, _boto3_session: boto3.session.Session
) -> S3ClientFactory:
    """Build fresh clients to the test server; other keyword arguments go to Config.

    Each client has its own event hooks, so a hook a test registers on one
    never leaks into another test or into bucket cleanup.
    """

    def make(*, endpoint_url: str | None = None, **config: Any) -> Any:
        config.setdefault("retries", {"mode": "standard", "total_max_attempts": 3})
        return _boto3_session.client(
            "s3",
            endpoint_url=endpoint_url or s3_server.endpoint_url,
            region_name=REGION,
            aws_access_key_id=DUMMY_CREDENTIALS,
            aws_secret_access_key=DUMMY_CREDENTIALS,
            config=Config(**config),
        )

    return make


@pytest.fixture
def s3_client(s3_client_factory: S3ClientFactory) -> Any:
    return s3_client_factory()


def _remove_bucket(client: Any, bucket: str) -> None:
    """Best effort: keep the server's memory flat over a long session."""
    try:
        try:
            client.get_object_lock_configuration(Bucket=bucket)
            locked = True
        except ClientError:
            locked = False
        objects: list[dict[str, str]] = []
        for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket):
            for entry in page.get("Versions", []) + page.get("DeleteMarkers", []):
                objects.append({"Key": entry["Key"], "VersionId": entry["VersionId"]})
        if locked:
            for entry in objects:
                with contextlib.suppress(ClientError):
                    client.put_object_legal_hold(
                        Bucket=bucket, **entry, LegalHold={"Status": "OFF"}
                    )
        for start in range(0, len(objects), 1000):
            client.delete_objects(
                Bucket=bucket,
                Delete={"Objects": objects[start : start + 1000], "Quiet": True},
                BypassGovernanceRetention=True,
            )
        client.delete_bucket(Bucket=bucket)
    except (ClientError, BotoCoreError):
        pass  # cleanup must not mask the test's own result


@contextlib.contextmanager
def _bucket(s3_client_factory: S3ClientFactory, **create: Any) -> Iterator[str]:
    # A client of its own, so hooks a test registers on s3_client cannot
    # interfere with the setup or the cleanup.
    client = s3_client_factory()
    name = f"lethe-test-{uuid.uuid4().hex[:16]}"
    client.create_bucket(Bucket=name, **create)
    try:
        yield name
    finally:
        _remove_bucket(client, name)


@pytest.fixture
def s3_bucket(s3_client_factory: S3ClientFactory) -> Iterator[str]:
    with _bucket(s3_client_factory) as name:
        yield name


@pytest.fixture
def s3_versioned_bucket(s3_client_factory: S3ClientFactory) -> Iterator[str]:
    with _bucket(s3_client_factory) as name:
        s3_client_factory().put_bucket_versioning(
            Bucket=name, VersioningConfiguration={"Status": "Enabled"}
        )
        yield name


@pytest.fixture
def s3_object_lock_bucket(s3_client_factory: S3ClientFactory) -> Iterator[str]:
    """Versioned, with Object Lock enabled: a legal hold makes deletes fail."""
    with _bucket(s3_client_factory, ObjectLockEnabledForBucket=True) as name:
        yield name
