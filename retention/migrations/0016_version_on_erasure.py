# What an erasure request does to a class (issue 29): each policy version says
# it, delete, redact or keep (keep with its written legal basis). Versions
# written before say what their disposition says: a redacting class redacts
# a subject's rows, every other class deletes them (CHANGELOG: upgrade notes).

from django.conf import settings
from django.db import migrations, models


def as_their_disposition(apps, schema_editor):
    PolicyVersion = apps.get_model("retention", "PolicyVersion")
    PolicyVersion.objects.filter(disposition="redact").update(on_erasure="redact")


class Migration(migrations.Migration):

    dependencies = [
        ('retention', '0015_record_subject'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='policyversion',
            name='erasure_basis',
            field=models.TextField(blank=True, db_default='', default=''),
        ),
        migrations.AddField(
            model_name='policyversion',
            name='on_erasure',
            field=models.CharField(choices=[('delete', 'Delete'), ('redact', 'Redact (model rows with strategies)'), ('keep', 'Keep (with a legal basis)')], db_default='delete', default='delete', max_length=10),
        ),
        migrations.RunPython(as_their_disposition, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='policyversion',
            constraint=models.CheckConstraint(condition=models.Q(('on_erasure__in', ['delete', 'redact', 'keep']), models.Q(models.Q(('on_erasure', 'keep'), _negated=True), models.Q(('erasure_basis', ''), _negated=True), _connector='OR')), name='retention_pv_erasure_keep_has_basis'),
        ),
    ]
