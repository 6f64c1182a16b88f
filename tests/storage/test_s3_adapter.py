from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from django.core.files.base import ContentFile
from storages.backends.s3 import S3Storage

from retention.storage import KeyResult, Outcome, StorageUnavailable
from retention.storage.s3 import S3Adapter
from tests.motoserver import DUMMY_CREDENTIALS, REGION, MotoServer

S3ClientFactory = Callable[..., Any]


def record_delete_requests(client: Any) -> list[list[dict[str, str]]]:
    """The Objects list of every DeleteObjects request the client sends."""
    requests: list[list[dict[str, str]]] = []

    def record(params: dict[str, Any], **kwargs: Any) -> None:
        requests.append(list(params["Delete"]["Objects"]))

    client.meta.events.register("before-parameter-build.s3.DeleteObjects", record)
    return requests


def record_calls(client: Any) -> list[str]:
    """The name of every operation the client sends."""
    calls: list[str] = []

    def record(model: Any, **kwargs: Any) -> None:
        calls.append(model.name)

    client.meta.events.register("before-call.s3", record)
    return calls


class _RawBody(io.BytesIO):
    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        while chunk := self.read(8192):
            yield chunk


def answer_delete_objects_with(client: Any, status: int, body: str) -> list[str]:
    """Answer every DeleteObjects with this response instead of sending it."""
    sent: list[str] = []

    def respond(request: Any, **kwargs: Any) -> AWSResponse:
        sent.append(request.url)
        headers = {"Content-Type": "application/xml", "x-amz-request-id": "test"}
        return AWSResponse(request.url, status, headers, _RawBody(body.encode()))

    client.meta.events.register("before-send.s3.DeleteObjects", respond)
    return sent


def put_held(client: Any, bucket: str, key: str, body: bytes) -> str:
    """An object under an Object Lock legal hold; its version id."""
    version: str = client.put_object(Bucket=bucket, Key=key, Body=body)["VersionId"]
    client.put_object_legal_hold(
        Bucket=bucket, Key=key, VersionId=version, LegalHold={"Status": "ON"}
    )
    return version


def put(client: Any, bucket: str, *keys: str) -> None:
    for key in keys:
        client.put_object(Bucket=bucket, Key=key, Body=b"data")


def exists(client: Any, bucket: str, key: str) -> bool:
    response = client.list_objects_v2(Bucket=bucket, Prefix=key)
    return any(item["Key"] == key for item in response.get("Contents", []))


def versions_of(client: Any, bucket: str, key: str) -> list[str]:
    response = client.list_object_versions(Bucket=bucket, Prefix=key)
    entries = response.get("Versions", []) + response.get("DeleteMarkers", [])
    return [entry["VersionId"] for entry in entries if entry["Key"] == key]


def unreachable_client(s3_client_factory: S3ClientFactory) -> Any:
    # Port 9 (discard) on loopback: nothing listens, the connection is refused.
    return s3_client_factory(
        endpoint_url="http://127.0.0.1:9",
        connect_timeout=1,
        read_timeout=1,
        retries={"mode": "standard", "total_max_attempts": 1},
    )


def test_check__existing_bucket_passes(s3_client: Any, s3_bucket: str) -> None:
    S3Adapter("uploads", s3_client, s3_bucket).check()


def test_check__missing_bucket_is_unavailable(s3_client: Any) -> None:
    adapter = S3Adapter("uploads", s3_client, "lethe-no-such-bucket")

    with pytest.raises(StorageUnavailable) as raised:
        adapter.check()

    message = str(raised.value)
    assert "'uploads'" in message
    assert "'lethe-no-such-bucket'" in message
    assert "does not exist" in message
    assert "\n" not in message


def test_check__unreachable_endpoint_is_unavailable(s3_client_factory: S3ClientFactory) -> None:
    adapter = S3Adapter("uploads", unreachable_client(s3_client_factory), "lethe-bucket")

    with pytest.raises(StorageUnavailable, match=r"'uploads'.*'lethe-bucket'.*unreachable"):
        adapter.check()


def test_delete_many__deletes_existing_keys(s3_client: Any, s3_bucket: str) -> None:
    put(s3_client, s3_bucket, "t1/a.jpg", "t1/b.jpg", "t1/c.jpg")
    adapter = S3Adapter("uploads", s3_client, s3_bucket)

    results = adapter.delete_many(["t1/a.jpg", "t1/b.jpg"])

    assert results == {
        "t1/a.jpg": KeyResult("t1/a.jpg", Outcome.DELETED),
        "t1/b.jpg": KeyResult("t1/b.jpg", Outcome.DELETED),
    }
    assert not exists(s3_client, s3_bucket, "t1/a.jpg")
    assert not exists(s3_client, s3_bucket, "t1/b.jpg")
    assert exists(s3_client, s3_bucket, "t1/c.jpg")


def test_delete_many__missing_key_is_success(s3_client: Any, s3_bucket: str) -> None:
    adapter = S3Adapter("uploads", s3_client, s3_bucket)

    results = adapter.delete_many(["never/written.jpg"])

    assert results["never/written.jpg"].outcome is Outcome.DELETED


def test_delete_many__probe_reports_absent(s3_client: Any, s3_bucket: str) -> None:
    put(s3_client, s3_bucket, "still-here.jpg")
    adapter = S3Adapter("uploads", s3_client, s3_bucket)
    requests = record_delete_requests(s3_client)

    results = adapter.delete_many(
        ["gone.jpg", "still-here.jpg", "not-probed.jpg"],
        probe={"gone.jpg", "still-here.jpg"},
    )

    assert results["gone.jpg"].outcome is Outcome.ABSENT
    assert results["still-here.jpg"].outcome is Outcome.DELETED
    assert results["not-probed.jpg"].outcome is Outcome.DELETED
    assert requests == [[{"Key": "still-here.jpg"}, {"Key": "not-probed.jpg"}]]
    assert not exists(s3_client, s3_bucket, "still-here.jpg")


def test_delete_many__probe_into_missing_bucket_is_unavailable(s3_client: Any) -> None:
    adapter = S3Adapter("uploads", s3_client, "lethe-no-such-bucket")

    with pytest.raises(StorageUnavailable, match="does not exist"):
        adapter.delete_many(["a.jpg"], probe={"a.jpg"})


def test_delete_many__missing_bucket_is_unavailable(s3_client: Any) -> None:
    adapter = S3Adapter("uploads", s3_client, "lethe-no-such-bucket")

    with pytest.raises(StorageUnavailable) as raised:
        adapter.delete_many(["secret/customer.jpg"])

    message = str(raised.value)
    assert "NoSuchBucket" in message
    assert "'uploads'" in message
    assert "customer" not in message


def test_delete_many__erasure_in_missing_bucket_is_unavailable(s3_client: Any) -> None:
    adapter = S3Adapter("uploads", s3_client, "lethe-no-such-bucket")

    with pytest.raises(StorageUnavailable, match="NoSuchBucket"):
        adapter.delete_many(["a.jpg"], erase_versions=True)


def test_delete_many__more_than_1000_keys_uses_several_requests(
    s3_client: Any, s3_bucket: str
) -> None:
    keys = [f"bulk/{index:05d}.bin" for index in range(2500)]
    # A few real objects spread over the chunks; the rest are absent, which
    # S3 reports as deleted, so the test need not seed 2,500 objects.
    seeded = [keys[0], keys[999], keys[1000], keys[2499]]
    put(s3_client, s3_bucket, *seeded)
    adapter = S3Adapter("uploads", s3_client, s3_bucket)
    requests = record_delete_requests(s3_client)

    results = adapter.delete_many(keys)

    assert [len(objects) for objects in requests] == [1000, 1000, 500]
    assert [item["Key"] for objects in requests for item in objects] == keys
    assert set(results) == set(keys)
    assert {result.outcome for result in results.values()} == {Outcome.DELETED}
    assert s3_client.list_objects_v2(Bucket=s3_bucket).get("KeyCount") == 0


def test_delete_many__chunk_size_bounds_each_request(s3_client: Any, s3_bucket: str) -> None:
    adapter = S3Adapter("uploads", s3_client, s3_bucket, chunk_size=2)
    requests = record_delete_requests(s3_client)

    adapter.delete_many(["a", "b", "c", "d", "e"])

    assert [len(objects) for objects in requests] == [2, 2, 1]


@pytest.mark.parametrize("chunk_size", [0, 1001])
def test_s3_adapter__chunk_size_outside_s3_limit_is_refused(
    s3_client: Any, chunk_size: int
) -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        S3Adapter("uploads", s3_client, "bucket", chunk_size=chunk_size)


def test_delete_many__empty_key_list_makes_no_request(s3_client: Any, s3_bucket: str) -> None:
    adapter = S3Adapter("uploads", s3_client, s3_bucket)
    calls = record_calls(s3_client)

    assert adapter.delete_many([]) == {}
    assert adapter.delete_many([], erase_versions=True) == {}
    assert calls == []


def test_delete_many__malformed_key_fails_fast_without_request(
    s3_client: Any, s3_bucket: str
) -> None:
    adapter = S3Adapter("uploads", s3_client, s3_bucket)
    calls = record_calls(s3_client)

    results = adapter.delete_many(["../escape.jpg", "a//b", "x\ny"], probe={"../escape.jpg"})

    assert {key: result.outcome for key, result in results.items()} == {
        "../escape.jpg": Outcome.PERMANENT,
        "a//b": Outcome.PERMANENT,
        "x\ny": Outcome.PERMANENT,
    }
    assert results["../escape.jpg"].reason.startswith("MalformedKey: ")
    assert "escape" not in results["../escape.jpg"].reason
    assert calls == []


def test_delete_many__malformed_key_does_not_hold_back_the_others(
    s3_client: Any, s3_bucket: str
) -> None:
    put(s3_client, s3_bucket, "good.jpg")
    adapter = S3Adapter("uploads", s3_client, s3_bucket)
    requests = record_delete_requests(s3_client)

    results = adapter.delete_many(["/bad.jpg", "good.jpg"])

    assert results["/bad.jpg"].outcome is Outcome.PERMANENT
    assert results["good.jpg"].outcome is Outcome.DELETED
    assert requests == [[{"Key": "good.jpg"}]]


def test_delete_many__every_key_gets_exactly_one_result(s3_client: Any, s3_bucket: str) -> None:
    adapter = S3Adapter("uploads", s3_client, s3_bucket)
    requests = record_delete_requests(s3_client)

    results = adapter.delete_many(["a", "b", "a", "", "b"], probe={"b"})

    assert list(results) == ["a", "b", ""]
    assert all(key == result.key for key, result in results.items())
    assert requests == [[{"Key": "a"}]]


def test_delete_many__versioned_bucket_without_erasure_keeps_the_data(
    s3_client: Any, s3_versioned_bucket: str
) -> None:
    put(s3_client, s3_versioned_bucket, "doc.pdf")
    adapter = S3Adapter("uploads", s3_client, s3_versioned_bucket)

    results = adapter.delete_many(["doc.pdf"])

    assert results["doc.pdf"].outcome is Outcome.DELETED
    assert not exists(s3_client, s3_versioned_bucket, "doc.pdf")
    # Only a delete marker was added: this is why erasure exists.
    assert len(versions_of(s3_client, s3_versioned_bucket, "doc.pdf")) == 2


def test_delete_many__versioned_erasure_leaves_no_version_or_marker(
    s3_client: Any, s3_versioned_bucket: str
) -> None:
    bucket = s3_versioned_bucket
    put(s3_client, bucket, "k", "k")
    s3_client.delete_object(Bucket=bucket, Key="k")
    put(s3_client, bucket, "k2", "k/child")
    assert len(versions_of(s3_client, bucket, "k")) == 3
    adapter = S3Adapter("uploads", s3_client, bucket)

    results = adapter.delete_many(["k"], erase_versions=True)

    assert results == {"k": KeyResult("k", Outcome.DELETED)}
    assert versions_of(s3_client, bucket, "k") == []
    assert len(versions_of(s3_client, bucket, "k2")) == 1
    assert len(versions_of(s3_client, bucket, "k/child")) == 1
    assert exists(s3_client, bucket, "k2")


def test_delete_many__erasure_spreads_many_versions_over_chunks(
    s3_client: Any, s3_versioned_bucket: str
) -> None:
    bucket = s3_versioned_bucket
    put(s3_client, bucket, "a", "a", "a", "b", "b")
    adapter = S3Adapter("uploads", s3_client, bucket, chunk_size=2)
    requests = record_delete_requests(s3_client)

    results = adapter.delete_many(["a", "b"], erase_versions=True)

    assert {key: result.outcome for key, result in results.items()} == {
        "a": Outcome.DELETED,
        "b": Outcome.DELETED,
    }
    assert [len(objects) for objects in requests] == [2, 2, 1]
    assert versions_of(s3_client, bucket, "a") == []
    assert versions_of(s3_client, bucket, "b") == []


def test_delete_many__erasure_of_key_without_versions_is_absent(
    s3_client: Any, s3_versioned_bucket: str
) -> None:
    put(s3_client, s3_versioned_bucket, "neighbour2")
    adapter = S3Adapter("uploads", s3_client, s3_versioned_bucket)
    requests = record_delete_requests(s3_client)

    results = adapter.delete_many(["neighbour"], erase_versions=True)

    assert results["neighbour"].outcome is Outcome.ABSENT
    assert requests == []
    assert exists(s3_client, s3_versioned_bucket, "neighbour2")


def test_delete_many__erasure_on_unversioned_bucket_deletes_the_object(
    s3_client: Any, s3_bucket: str
) -> None:
    put(s3_client, s3_bucket, "plain.txt")
    adapter = S3Adapter("uploads", s3_client, s3_bucket)

    results = adapter.delete_many(["plain.txt"], erase_versions=True)

    assert results["plain.txt"].outcome is Outcome.DELETED
    assert versions_of(s3_client, s3_bucket, "plain.txt") == []


def test_delete_many__object_lock_refusal_per_key_is_locked_not_permanent(
    s3_client: Any, s3_object_lock_bucket: str
) -> None:
    bucket = s3_object_lock_bucket
    held = put_held(s3_client, bucket, "held.jpg", b"data")
    put(s3_client, bucket, "free.jpg")
    adapter = S3Adapter("uploads", s3_client, bucket)

    results = adapter.delete_many(["held.jpg", "free.jpg"], erase_versions=True)

    assert results["held.jpg"].outcome is Outcome.LOCKED
    # What moto (and S3) answer for a version under a legal hold, per key.
    assert results["held.jpg"].reason == (
        "AccessDenied: Access Denied because object protected by object lock."
    )
    assert "held.jpg" not in results["held.jpg"].reason
    assert results["free.jpg"].outcome is Outcome.DELETED
    assert versions_of(s3_client, bucket, "held.jpg") == [held]
    assert versions_of(s3_client, bucket, "free.jpg") == []


def test_delete_many__one_held_version_makes_the_key_locked(
    s3_client: Any, s3_object_lock_bucket: str
) -> None:
    bucket = s3_object_lock_bucket
    held = put_held(s3_client, bucket, "doc.pdf", b"old")
    put(s3_client, bucket, "doc.pdf")
    adapter = S3Adapter("uploads", s3_client, bucket)

    results = adapter.delete_many(["doc.pdf"], erase_versions=True)

    assert results["doc.pdf"].outcome is Outcome.LOCKED
    assert versions_of(s3_client, bucket, "doc.pdf") == [held]


def test_delete_many__throttled_request_is_transient_and_marked_throttled(
    s3_client_factory: S3ClientFactory, s3_bucket: str
) -> None:
    client = s3_client_factory(retries={"mode": "standard", "total_max_attempts": 1})
    put(client, s3_bucket, "a.jpg", "b.jpg")
    sent = answer_delete_objects_with(
        client,
        503,
        "<?xml version='1.0' encoding='UTF-8'?>"
        "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
        "<RequestId>test</RequestId></Error>",
    )
    adapter = S3Adapter("uploads", client, s3_bucket)

    results = adapter.delete_many(["a.jpg", "b.jpg"])

    assert results == {
        key: KeyResult(
            key, Outcome.TRANSIENT, "SlowDown: Please reduce your request rate.", throttled=True
        )
        for key in ["a.jpg", "b.jpg"]
    }
    assert len(sent) == 1
    assert exists(client, s3_bucket, "a.jpg")


@pytest.mark.parametrize(
    ("status", "code", "throttled"),
    [
        pytest.param(
            429, "<Code>EnhanceYourCalm</Code><Message>Too many.</Message>", True, id="429"
        ),
        pytest.param(500, "<Code>InternalError</Code><Message>Oops.</Message>", False, id="500"),
    ],
)
def test_delete_many__429_without_a_known_code_is_throttled_a_server_error_is_not(
    s3_client_factory: S3ClientFactory, s3_bucket: str, status: int, code: str, throttled: bool
) -> None:
    """Both are transient; only the 429 asks for a slower pace."""
    client = s3_client_factory(retries={"mode": "standard", "total_max_attempts": 1})
    answer_delete_objects_with(
        client, status, f"<?xml version='1.0' encoding='UTF-8'?><Error>{code}</Error>"
    )
    adapter = S3Adapter("uploads", client, s3_bucket)

    results = adapter.delete_many(["a.jpg"])

    assert results["a.jpg"].outcome is Outcome.TRANSIENT
    assert results["a.jpg"].throttled == throttled


def test_delete_many__throttled_head_probe_is_marked_throttled(
    s3_client_factory: S3ClientFactory, s3_bucket: str
) -> None:
    client = s3_client_factory(retries={"mode": "standard", "total_max_attempts": 1})

    def slow_down(request: Any, **kwargs: Any) -> AWSResponse:
        headers = {"x-amz-request-id": "test"}
        return AWSResponse(request.url, 503, headers, _RawBody(b""))

    client.meta.events.register("before-send.s3.HeadObject", slow_down)
    adapter = S3Adapter("uploads", client, s3_bucket)

    results = adapter.delete_many(["a.jpg"], probe=["a.jpg"])

    assert results["a.jpg"].outcome is Outcome.TRANSIENT
    assert results["a.jpg"].throttled


def test_delete_many__access_denied_request_is_permanent(
    s3_client_factory: S3ClientFactory, s3_bucket: str
) -> None:
    client = s3_client_factory(retries={"mode": "standard", "total_max_attempts": 1})
    answer_delete_objects_with(
        client,
        403,
        "<?xml version='1.0' encoding='UTF-8'?>"
        "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>",
    )
    adapter = S3Adapter("uploads", client, s3_bucket)

    results = adapter.delete_many(["a.jpg", "b.jpg"])

    assert {result.outcome for result in results.values()} == {Outcome.PERMANENT}
    assert results["a.jpg"].reason == "AccessDenied: Access Denied"


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        ("NoSuchKey", Outcome.ABSENT),
        ("NoSuchVersion", Outcome.ABSENT),
        ("SlowDown", Outcome.TRANSIENT),
        ("InternalError", Outcome.TRANSIENT),
        ("ServiceUnavailable", Outcome.TRANSIENT),
        ("RequestTimeout", Outcome.TRANSIENT),
        ("AccessDenied", Outcome.PERMANENT),
        ("InvalidObjectState", Outcome.PERMANENT),
        ("SomethingNew", Outcome.PERMANENT),
    ],
)
def test_delete_many__per_key_error_codes_map_to_outcomes(
    s3_client_factory: S3ClientFactory, s3_bucket: str, code: str, outcome: Outcome
) -> None:
    client = s3_client_factory(retries={"mode": "standard", "total_max_attempts": 1})
    answer_delete_objects_with(
        client,
        200,
        "<?xml version='1.0' encoding='UTF-8'?>"
        "<DeleteResult xmlns='http://s3.amazonaws.com/doc/2006-03-01/'>"
        "<Deleted><Key>ok.jpg</Key></Deleted>"
        f"<Error><Key>tenant/jane.doe/scan.jpg</Key><Code>{code}</Code>"
        "<Message>Failed on tenant/jane.doe/scan.jpg</Message></Error>"
        "</DeleteResult>",
    )
    adapter = S3Adapter("uploads", client, s3_bucket)

    results = adapter.delete_many(["ok.jpg", "tenant/jane.doe/scan.jpg"])

    assert results["ok.jpg"].outcome is Outcome.DELETED
    failed = results["tenant/jane.doe/scan.jpg"]
    assert failed.outcome is outcome
    assert failed.reason == f"{code}: Failed on <key>"
    assert failed.throttled is (code in {"SlowDown", "ServiceUnavailable"})
    assert not results["ok.jpg"].throttled


def test_delete_many__key_missing_from_the_answer_is_transient(
    s3_client_factory: S3ClientFactory, s3_bucket: str
) -> None:
    client = s3_client_factory(retries={"mode": "standard", "total_max_attempts": 1})
    answer_delete_objects_with(
        client,
        200,
        "<?xml version='1.0' encoding='UTF-8'?>"
        "<DeleteResult xmlns='http://s3.amazonaws.com/doc/2006-03-01/'>"
        "<Deleted><Key>a.jpg</Key></Deleted></DeleteResult>",
    )
    adapter = S3Adapter("uploads", client, s3_bucket)

    results = adapter.delete_many(["a.jpg", "b.jpg"])

    assert results["a.jpg"].outcome is Outcome.DELETED
    assert results["b.jpg"].outcome is Outcome.TRANSIENT


def test_delete_many__garbled_answer_is_transient(
    s3_client_factory: S3ClientFactory, s3_bucket: str
) -> None:
    client = s3_client_factory(retries={"mode": "standard", "total_max_attempts": 1})
    answer_delete_objects_with(client, 200, "<html><body>proxy hiccup")
    adapter = S3Adapter("uploads", client, s3_bucket)

    results = adapter.delete_many(["a.jpg"])

    assert results["a.jpg"].outcome is Outcome.TRANSIENT


def test_delete_many__unreachable_endpoint_is_transient(
    s3_client_factory: S3ClientFactory,
) -> None:
    adapter = S3Adapter("uploads", unreachable_client(s3_client_factory), "lethe-bucket")

    results = adapter.delete_many(["a/secret.jpg", "b.jpg"], probe={"a/secret.jpg"})

    assert {result.outcome for result in results.values()} == {Outcome.TRANSIENT}
    assert results["a/secret.jpg"].reason.startswith("EndpointConnectionError: ")
    assert "secret" not in results["a/secret.jpg"].reason


def test_delete_many__prefix_maps_names_to_keys_under_it(s3_client: Any, s3_bucket: str) -> None:
    put(s3_client, s3_bucket, "media/a.jpg", "a.jpg")
    adapter = S3Adapter("uploads", s3_client, s3_bucket, prefix="media/")

    results = adapter.delete_many(["a.jpg"], probe={"a.jpg"})

    assert results == {"a.jpg": KeyResult("a.jpg", Outcome.DELETED)}
    assert not exists(s3_client, s3_bucket, "media/a.jpg")
    assert exists(s3_client, s3_bucket, "a.jpg")


def test_delete_many__key_too_long_under_the_prefix_is_permanent(
    s3_client: Any, s3_bucket: str
) -> None:
    adapter = S3Adapter("uploads", s3_client, s3_bucket, prefix="media")
    calls = record_calls(s3_client)
    key = "x" * 1020

    results = adapter.delete_many([key])

    assert results[key].outcome is Outcome.PERMANENT
    assert "1026 bytes" in results[key].reason
    assert calls == []


def make_storage(s3_server: MotoServer, bucket: str, **options: Any) -> S3Storage:
    return S3Storage(
        bucket_name=bucket,
        endpoint_url=s3_server.endpoint_url,
        access_key=DUMMY_CREDENTIALS,
        secret_key=DUMMY_CREDENTIALS,
        region_name=REGION,
        **options,
    )


def test_from_storage__deletes_the_storage_name_under_its_location(
    s3_server: MotoServer, s3_client: Any, s3_bucket: str
) -> None:
    storage = make_storage(s3_server, s3_bucket, location="media")
    name = storage.save("tenant-1/scan.jpg", ContentFile(b"data"))
    assert exists(s3_client, s3_bucket, f"media/{name}")
    adapter = S3Adapter.from_storage("uploads", storage)

    adapter.check()
    results = adapter.delete_many([name], probe={name})

    assert results == {name: KeyResult(name, Outcome.DELETED)}
    assert not storage.exists(name)


def test_from_storage__client_has_timeouts_and_bounded_retries(
    s3_server: MotoServer, s3_bucket: str
) -> None:
    storage = make_storage(s3_server, s3_bucket, addressing_style="path")

    adapter = S3Adapter.from_storage(
        "uploads", storage, connect_timeout=2, read_timeout=7, max_attempts=4, chunk_size=500
    )

    config = adapter.client.meta.config
    assert (config.connect_timeout, config.read_timeout) == (2, 7)
    assert config.retries == {"mode": "standard", "total_max_attempts": 4}
    assert config.s3 == {"addressing_style": "path"}
    assert adapter.client.meta.endpoint_url == s3_server.endpoint_url
    assert (adapter.alias, adapter.bucket, adapter.chunk_size) == ("uploads", s3_bucket, 500)


def test_from_storage__check_reports_missing_bucket(s3_server: MotoServer) -> None:
    adapter = S3Adapter.from_storage("uploads", make_storage(s3_server, "lethe-no-such-bucket"))

    with pytest.raises(StorageUnavailable, match="does not exist"):
        adapter.check()
