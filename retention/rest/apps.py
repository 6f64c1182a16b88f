from __future__ import annotations

from django.apps import AppConfig


class RetentionRestConfig(AppConfig):
    """The REST API and its tenant API keys, for hosts that serve the API.

    An app of its own, the way DRF ships ``rest_framework.authtoken``: the core
    ``retention`` app never imports it, so a host without DRF starts, migrates
    and runs retention without it.
    """

    name = "retention.rest"
    label = "retention_rest"
    verbose_name = "Retention API"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from retention.rest import checks  # noqa: F401  (registers the API's system checks)
