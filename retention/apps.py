from __future__ import annotations

import django_stubs_ext
from django.apps import AppConfig

# The admin subscripts Django's generic classes (``ModelAdmin[Policy]``) for
# mypy; Django gives them no ``__class_getitem__``. An app's config module is
# imported before any of its models or admin modules, whatever the order of
# INSTALLED_APPS.
django_stubs_ext.monkeypatch()


class RetentionConfig(AppConfig):
    name = "retention"
    verbose_name = "Retention"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from retention import (
            checks,  # noqa: F401  (registers the system checks)
            datamap_checks,  # noqa: F401  (and the data map's)
            retired,  # noqa: F401  (and the one naming settings no longer read)
        )
        from retention.anchoring import checks as anchor_checks  # noqa: F401  (and anchoring's)
        from retention.rows import checks as row_checks  # noqa: F401  (and those of model rows)
        from retention.storage import checks as lock_checks  # noqa: F401  (Object Lock mirror)
