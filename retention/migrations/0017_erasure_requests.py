# Erasure requests (issue 29): one data subject, one tenant or a subject within
# a tenant, erased everywhere; received, approved by a second person, then
# executed. At most one open request per subject (within a tenant) or tenant.

import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retention', '0016_version_on_erasure'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ErasureRequest',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('state', models.CharField(choices=[('received', 'Received'), ('approved', 'Approved'), ('executing', 'Executing'), ('completed', 'Completed'), ('partially_completed', 'Partially completed (items kept under a hold)'), ('rejected', 'Rejected'), ('cancelled', 'Cancelled')], default='received', max_length=20)),
                ('subject_id', models.TextField(blank=True, default='')),
                ('subject_digest', models.CharField(blank=True, default='', max_length=64)),
                ('tenant_id', models.CharField(blank=True, default='', max_length=100)),
                ('data_classes', models.JSONField(blank=True, default=list)),
                ('reason', models.TextField()),
                ('received_at', models.DateTimeField()),
                ('due_at', models.DateTimeField()),
                ('not_before', models.DateTimeField(blank=True, null=True)),
                ('scope', models.JSONField(default=dict)),
                ('approved_at', models.DateTimeField(blank=True, null=True)),
                ('ended_at', models.DateTimeField(blank=True, null=True)),
                ('end_reason', models.TextField(blank=True, default='')),
                ('completed_at', models.DateTimeField(blank=True, null=True)),
                ('verified_at', models.DateTimeField(blank=True, null=True)),
                ('approved_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('ended_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('requested_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-received_at'],
                'permissions': [('approve_erasurerequest', 'Can approve or reject erasure requests')],
                'constraints': [models.CheckConstraint(condition=models.Q(('state__in', ['received', 'approved', 'executing', 'completed', 'partially_completed', 'rejected', 'cancelled'])), name='retention_erasure_state_valid'), models.CheckConstraint(condition=models.Q(models.Q(('subject_digest', ''), _negated=True), models.Q(('tenant_id', ''), _negated=True), _connector='OR'), name='retention_erasure_subject_or_tenant'), models.CheckConstraint(condition=models.Q(('reason', ''), _negated=True), name='retention_erasure_has_reason'), models.CheckConstraint(condition=models.Q(('approved_by__isnull', True), models.Q(('approved_by', models.F('requested_by')), _negated=True), _connector='OR'), name='retention_erasure_four_eyes'), models.UniqueConstraint(condition=models.Q(('state__in', ('received', 'approved', 'executing', 'partially_completed'))), fields=('subject_digest', 'tenant_id'), name='retention_erasure_one_open')],
            },
        ),
    ]
