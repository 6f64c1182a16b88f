# A record's key digest is looked up by equality only (the admin's search):
# the LIKE-pattern index Django adds beside a CharField's index on
# PostgreSQL serves no query, and the finalize's update of every deleted
# record (not a HOT update) and every track() paid one more index entry for
# it (issue 31). The model's plain index stays; Django's own AlterField
# drops this index with IF EXISTS, so a later change of the field is safe.

from django.db import migrations

TABLE = "retention_retentionrecord"


def _like_index_name(schema_editor):
    return schema_editor._create_index_name(TABLE, ["key_digest"], suffix="_like")


def drop_like_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        name = schema_editor.quote_name(_like_index_name(schema_editor))
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


def create_like_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        name = schema_editor.quote_name(_like_index_name(schema_editor))
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON {TABLE} (key_digest varchar_pattern_ops)"
        )


class Migration(migrations.Migration):

    dependencies = [
        ('retention', '0023_run_batch_uncounted'),
    ]

    operations = [
        migrations.RunPython(drop_like_index, create_like_index, elidable=False),
    ]
