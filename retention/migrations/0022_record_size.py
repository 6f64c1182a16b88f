# A tracked object's size in bytes, as the host gives track(size=) (issue 30,
# point 3: a dry run's sample shows it). Nullable, with no default: records
# written before have none, and PostgreSQL adds the column without rewriting
# the table.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retention', '0021_run_batch_plural'),
    ]

    operations = [
        migrations.AddField(
            model_name='retentionrecord',
            name='size_bytes',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
    ]
