"""A host app's migration creating an index on django-q2's table (for W004's tests)."""

from __future__ import annotations

from django.db import migrations

from retention.migration_ops import AddIndexOnModel


class Migration(migrations.Migration):
    atomic = False
    initial = True
    dependencies = [("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more")]
    operations = [
        AddIndexOnModel(
            "django_q", "task", fields=["stopped", "id"], name="django_q_t_stopped_h5test_idx"
        ),
    ]
