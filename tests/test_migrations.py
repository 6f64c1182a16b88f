from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone
from rest_framework_api_key.crypto import KeyGenerator

from retention.models import PolicyVersion as PolicyVersionNow
from retention.rest.models import TenantAPIKey
from tests.factories import UserFactory

CORE_0007 = ("retention", "0007_event_record_index_covered")


@pytest.mark.django_db
def test_migrations__models_and_committed_migrations_agree():
    out = StringIO()

    # --check exits non-zero (SystemExit) when a migration is missing.
    call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=StringIO())

    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_migrations__an_upgraded_database_keeps_its_api_keys_and_their_permissions():
    executor = MigrationExecutor(connection)
    executor.migrate([CORE_0007, ("retention_rest", None)])
    old_apps = executor.loader.project_state([CORE_0007]).apps
    # As 0.1 left it (migrating back relabels the content type too): the key in
    # the core app, its permissions under "retention".
    secret, prefix, hashed = KeyGenerator().generate()
    old_apps.get_model("retention", "TenantAPIKey").objects.create(
        id=f"{prefix}.{hashed}", prefix=prefix, hashed_key=hashed, name="old", tenant_id="acme"
    )
    ContentType.objects.clear_cache()
    old_type = ContentType.objects.get(app_label="retention", model="tenantapikey")
    revoke = Permission.objects.get(content_type=old_type, codename="revoke_tenantapikey")
    keeper = UserFactory(username="keeper")
    keeper.user_permissions.add(revoke)
    ContentType.objects.clear_cache()

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    key = TenantAPIKey.objects.get_from_key(secret)
    assert (key.prefix, key.tenant_id, key.name) == (prefix, "acme", "old")
    assert key.is_valid(secret)
    keeper = get_user_model().objects.get(pk=keeper.pk)
    assert keeper.has_perm("retention_rest.revoke_tenantapikey")
    assert ContentType.objects.get_for_model(TenantAPIKey).pk == old_type.pk
    assert not ContentType.objects.filter(app_label="retention", model="tenantapikey").exists()


@pytest.mark.django_db(transaction=True)
def test_migrations__versions_written_before_on_erasure_do_what_their_disposition_does():
    before = [("retention", "0015_record_subject")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    author = UserFactory(username="author")
    Policy = old_apps.get_model("retention", "Policy")
    PolicyVersion = old_apps.get_model("retention", "PolicyVersion")
    ids = {}
    for data_class, disposition in (("accounts.redact", "redact"), ("idv.photo", "delete")):
        policy = Policy.objects.create(data_class=data_class)
        version = PolicyVersion.objects.create(
            policy=policy,
            number=1,
            retention_period=timedelta(days=30),
            disposition=disposition,
            author_id=author.pk,
            created_at=timezone.now(),
        )
        ids[data_class] = version.pk

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    on_erasure = dict(
        PolicyVersionNow.objects.filter(pk__in=ids.values()).values_list(
            "policy__data_class", "on_erasure"
        )
    )
    assert on_erasure == {"accounts.redact": "redact", "idv.photo": "delete"}


def _record_indexes() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s",
            ["retention_retentionrecord"],
        )
        return dict(cursor.fetchall())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_migrations__records_keep_one_key_digest_index_and_no_like_pattern_one():
    digest = [d for d in _record_indexes().values() if "(key_digest" in d]
    assert len(digest) == 1 and "varchar_pattern_ops" not in digest[0]

    # Backwards puts the pattern index back; forwards drops it again.
    executor = MigrationExecutor(connection)
    executor.migrate([("retention", "0023_run_batch_uncounted")])
    assert any("varchar_pattern_ops" in d for d in _record_indexes().values())
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert not any("varchar_pattern_ops" in d for d in _record_indexes().values())
