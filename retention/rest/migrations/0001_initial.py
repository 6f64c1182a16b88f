# The tenant API keys and seen signatures, taken over from the core app
# (retention.0008_api_models_to_rest_app). Their tables were created by
# retention.0002 and keep their names: only the migration state is created
# here. Their content types move to this app's label, so permissions already
# given on keys (retention.revoke_tenantapikey, ...) stay given, now as
# retention_rest.*.

from django.db import migrations, models

MODELS = ("tenantapikey", "seenrequestsignature")


def _relabel_content_types(apps, schema_editor, old_label, new_label):
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for model in MODELS:
        if ContentType.objects.using(db).filter(app_label=new_label, model=model).exists():
            continue
        ContentType.objects.using(db).filter(app_label=old_label, model=model).update(
            app_label=new_label
        )
    ContentType.objects.clear_cache()


def forwards(apps, schema_editor):
    _relabel_content_types(apps, schema_editor, "retention", "retention_rest")


def backwards(apps, schema_editor):
    _relabel_content_types(apps, schema_editor, "retention_rest", "retention")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('retention', '0008_api_models_to_rest_app'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='SeenRequestSignature',
                    fields=[
                        ('digest', models.CharField(max_length=64, primary_key=True, serialize=False)),
                        ('key_id', models.CharField(max_length=100)),
                        ('signed_at', models.DateTimeField(db_index=True)),
                        ('seen_at', models.DateTimeField()),
                    ],
                    options={
                        'db_table': 'retention_seenrequestsignature',
                    },
                ),
                migrations.CreateModel(
                    name='TenantAPIKey',
                    fields=[
                        ('id', models.CharField(editable=False, max_length=150, primary_key=True, serialize=False, unique=True)),
                        ('prefix', models.CharField(editable=False, max_length=8, unique=True)),
                        ('hashed_key', models.CharField(editable=False, max_length=150)),
                        ('created', models.DateTimeField(auto_now_add=True, db_index=True)),
                        ('name', models.CharField(default=None, help_text='A free-form name for the API key. Need not be unique. 50 characters max.', max_length=50)),
                        ('revoked', models.BooleanField(blank=True, default=False, help_text='If the API key is revoked, clients cannot use it anymore. (This cannot be undone.)')),
                        ('expiry_date', models.DateTimeField(blank=True, help_text='Once API key expires, clients cannot use it anymore.', null=True, verbose_name='Expires')),
                        ('tenant_id', models.CharField(db_index=True, max_length=100)),
                        ('revoked_at', models.DateTimeField(blank=True, null=True)),
                    ],
                    options={
                        'verbose_name': 'tenant API key',
                        'verbose_name_plural': 'tenant API keys',
                        'db_table': 'retention_tenantapikey',
                        'ordering': ('-created',),
                        'permissions': [('revoke_tenantapikey', 'Can revoke tenant API keys')],
                        'abstract': False,
                        'constraints': [models.CheckConstraint(condition=models.Q(('tenant_id', ''), _negated=True), name='retention_apikey_has_tenant'), models.CheckConstraint(condition=models.Q(models.Q(('revoked', False), ('revoked_at__isnull', True)), models.Q(('revoked', True), ('revoked_at__isnull', False)), _connector='OR'), name='retention_apikey_revocation_complete')],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
