# A record's key digest is looked up by equality only (the admin's search):
# the LIKE-pattern index Django adds beside a CharField's index on
# PostgreSQL serves no query, and the finalize's update of every deleted
# record (not a HOT update) and every track() paid one more index entry for
# it (issue 31). The model's plain index stays. Dropped CONCURRENTLY (so
# the migration is not atomic): a plain DROP INDEX would wait for the
# table's lock behind running claims and finalizes and hold up every write
# queued after it. A later migration changing the field's type would make
# Django build the index again.

from django.db import migrations

TABLE = "retention_retentionrecord"


def _like_index_name(schema_editor):
    return schema_editor._create_index_name(TABLE, ["key_digest"], suffix="_like")


def drop_like_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        name = schema_editor.quote_name(_like_index_name(schema_editor))
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


def create_like_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        name = schema_editor.quote_name(_like_index_name(schema_editor))
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} "
            f"ON {TABLE} (key_digest varchar_pattern_ops)"
        )


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('retention', '0023_run_batch_uncounted'),
    ]

    operations = [
        migrations.RunPython(drop_like_index, create_like_index, elidable=False),
    ]
