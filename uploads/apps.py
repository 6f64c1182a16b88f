"""The example host app: its uploads, and its own tables governed as data classes."""

from __future__ import annotations

from django.apps import AppConfig

REQUEST_LOGS = "logs.api_request"
CLOSED_ACCOUNTS = "customers.closed"
REDACTED_NAME = "[redacted]"


class UploadsConfig(AppConfig):
    name = "uploads"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from retention import api
        from retention.redaction import Constant, Digest, Mask
        from uploads.models import ApiRequestLog, CustomerAccount

        # Millions of rows a month: one evidence event per page, not per row.
        api.register_model(
            ApiRequestLog,
            data_class=REQUEST_LOGS,
            age_field="created_at",
            tenant_field="tenant_id",
            evidence="per_batch",
        )
        api.register_model(
            CustomerAccount,
            data_class=CLOSED_ACCOUNTS,
            age_field="closed_at",
            tenant_field="tenant_id",
            # The account's id is its customer's stable id: erasure requests name it.
            subject_field="id",
            # Digest keeps distinct emails distinct, so the unique index holds.
            redact={
                "name": Constant(REDACTED_NAME),
                "email": Digest(),
                "phone": Mask(keep_last=2),
            },
        )
