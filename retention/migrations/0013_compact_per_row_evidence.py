# Per-row evidence of model rows in a compact shape: a page event per tenant
# and outcome carrying its rows' subjects, and each row's idempotency key in
# a narrow table of its own. Events written before (one DeletionEvent per
# row) stay as they are and still verify; their keys are not carried over
# (an integer primary key is now part of its row's key, which their digests
# do not give back).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retention", "0012_safety_nets"),
    ]

    operations = [
        migrations.CreateModel(
            name="RowEventKey",
            fields=[
                ("key", models.UUIDField(primary_key=True, serialize=False)),
            ],
            options={
                "verbose_name": "row event key",
            },
        ),
        migrations.AddField(
            model_name="deletionevent",
            name="evidence",
            field=models.CharField(blank=True, db_default="", default="", max_length=10),
        ),
        migrations.AddField(
            model_name="deletionevent",
            name="row_subjects",
            field=models.BinaryField(blank=True, null=True),
        ),
    ]
