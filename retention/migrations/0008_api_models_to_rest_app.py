# The tenant API keys and seen signatures belong to the API sub-app
# (retention.rest, label retention_rest) from here on. Only the migration
# state moves: the tables keep their names and rows, and
# retention_rest.0001_initial takes them over.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('retention', '0007_event_record_index_covered'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='SeenRequestSignature'),
                migrations.DeleteModel(name='TenantAPIKey'),
            ],
            database_operations=[],
        ),
    ]
