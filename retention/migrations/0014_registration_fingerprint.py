# Each policy version of a class of model rows records the host's
# registration (model, fields, the scope's SQL, strategies, files, evidence)
# as approved, with its fingerprint. Versions approved before stay empty:
# their classes dispose of nothing until a version recording the
# registration is approved (CHANGELOG: upgrade notes).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retention", "0013_compact_per_row_evidence"),
    ]

    operations = [
        migrations.AddField(
            model_name="policyversion",
            name="registration",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="policyversion",
            name="registration_fingerprint",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
    ]
