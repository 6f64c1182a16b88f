# Items a queued batch's claims took while the run's row was busy, kept on
# the batch until its finalize (or the run's close) adds them to the run's
# claimed count, so a worker that dies in between loses none (issue 31).
# A constant db_default: PostgreSQL adds the column without a rewrite.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retention', '0022_record_size'),
    ]

    operations = [
        migrations.AddField(
            model_name='runbatch',
            name='uncounted',
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
    ]
