# A tracked object's data subject, as a keyed digest of the id the host gives
# track(subject_id=) (issue 29): records written before have none (""), and
# the partial index holds only records with a subject.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retention', '0014_registration_fingerprint'),
    ]

    operations = [
        migrations.AddField(
            model_name='retentionrecord',
            name='subject_digest',
            field=models.CharField(blank=True, db_default='', default='', max_length=64),
        ),
        migrations.AddIndex(
            model_name='retentionrecord',
            index=models.Index(condition=models.Q(('subject_digest', ''), _negated=True), fields=['subject_digest', 'tenant_id'], name='retention_record_subject'),
        ),
    ]
