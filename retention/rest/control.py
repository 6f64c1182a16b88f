"""The control plane: operators' HMAC-signed requests to start a run and follow it.

Not for tenants: these endpoints authenticate a signed request (key id,
timestamp, signature over method, path, timestamp and body digest), never
a tenant API key.
"""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from retention.clock import db_now
from retention.engine import run_enqueue
from retention.models import RunMode, RunStatus, RunTrigger, data_class_validator
from retention.reporting import run_as_json
from retention.rest.exceptions import ApiError, RunRefusedErrorSerializer
from retention.rest.schema import error_responses
from retention.rest.views import ControlPlaneApiView
from retention.selectors.runs import run_batches_by_state, run_get


class _JsonString(serializers.CharField):
    """A JSON string, not a number DRF would turn into one."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class _JsonInteger(serializers.IntegerField):
    """A JSON integer, not a string or a boolean DRF would read as one."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class _JsonNumber(serializers.FloatField):
    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


class RunStartApi(ControlPlaneApiView):
    class InputSerializer(serializers.Serializer[dict[str, Any]]):
        # A sweep by age only: a reconciliation has its own command, and an erase run
        # exists only for an approved erasure request (a database constraint).
        mode = serializers.ChoiceField(
            choices=[(m.value, m.label) for m in (RunMode.DRY_RUN, RunMode.ENFORCE)]
        )
        data_classes = serializers.ListField(
            child=_JsonString(max_length=100, validators=[data_class_validator]),
            required=False,
            max_length=100,
            help_text="Default: every data class (an enforcing run: every enforced one).",
        )
        tenant_id = _JsonString(required=False, max_length=100)
        limit = _JsonInteger(required=False, min_value=1)
        max_seconds = _JsonNumber(
            required=False, min_value=1, max_value=86400, help_text="Time budget of the sweep."
        )

        # The schema says so too (additionalProperties: false; RetentionAutoSchema).
        refuses_unknown_keys = True

        class Meta:
            ref_name = "RunStart"

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            # A misspelt key would otherwise widen the run to every class.
            unknown = set(self.initial_data) - set(self.fields)
            if unknown:
                raise serializers.ValidationError(dict.fromkeys(sorted(unknown), "Unknown field."))
            return attrs

    class OutputSerializer(serializers.Serializer[Any]):
        run_id = serializers.UUIDField(source="pk")
        status = serializers.CharField()
        mode = serializers.CharField()
        trigger = serializers.CharField()
        data_classes = serializers.ListField(child=serializers.CharField())
        tenant_id = serializers.CharField(allow_null=True)
        cutoff = serializers.DateTimeField()
        started_at = serializers.DateTimeField()

        class Meta:
            ref_name = "RunAccepted"

    @extend_schema(
        operation_id="runs_start",
        summary="Trigger a retention run (operators; signed)",
        description="The run is written to the ledger, with its leases, before this answers "
        "202; a django-q2 worker then sweeps it. An exact replay of a signed request is "
        "refused, as is a timestamp more than 300 s from the server's clock.",
        request=InputSerializer,
        responses={
            202: OutputSerializer,
            409: OpenApiResponse(
                RunRefusedErrorSerializer,
                description="Refused (`run_refused`): lease held, paused, report-only "
                "class, storage unreachable. The refused run stays in the ledger.",
            ),
            **error_responses(400, 401, 413, 415, 503),
        },
        tags=["runs"],
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = run_enqueue(
            trigger=RunTrigger.API,
            key_id=request.user.key_id,  # type: ignore[union-attr]
            now=db_now(),
            mode=data.validated_data["mode"],
            data_classes=data.validated_data.get("data_classes"),
            tenant_id=data.validated_data.get("tenant_id"),
            limit=data.validated_data.get("limit"),
            max_seconds=data.validated_data.get("max_seconds"),
        )
        run.refresh_from_db()
        if run.status == RunStatus.ERROR:
            # Recorded, but its task could not be queued; the run was closed.
            raise ApiError(
                f"Run {run.pk} was recorded but could not be queued; it was closed. Retry later.",
                code="queue_unavailable",
                status_code=503,
            )
        return Response(self.OutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class RunDetailApi(ControlPlaneApiView):
    """A run's status and counts, so an operators' scheduler can wait for it to end."""

    class OutputSerializer(serializers.Serializer[dict[str, Any]]):
        run_id = serializers.UUIDField()
        mode = serializers.CharField()
        trigger = serializers.CharField()
        status = serializers.CharField(
            help_text="`running` until the run ends: finished, stopped, paused, refused, "
            "abandoned or error."
        )
        status_reason = serializers.CharField(allow_blank=True)
        data_classes = serializers.ListField(child=serializers.CharField())
        tenant_id = serializers.CharField(allow_null=True)
        cutoff = serializers.CharField()
        cutoffs = serializers.DictField(
            child=serializers.CharField(),
            help_text="Each data class's own cutoff: its records' or rows' column is "
            "compared with it (a class of rows cut by age: their own date).",
        )
        units = serializers.DictField(
            child=serializers.CharField(), help_text="`records` or `rows`, per data class."
        )
        counts = serializers.DictField(child=serializers.IntegerField())
        retried = serializers.IntegerField(
            help_text="Transient failures put back for a retry (an unreachable store)."
        )
        oldest_eligible_at = serializers.CharField(allow_null=True)
        oldest_due_at = serializers.CharField(
            allow_null=True, help_text="The earliest deadline among the run's eligible items."
        )
        started_at = serializers.CharField()
        finished_at = serializers.CharField(allow_null=True)
        batches = serializers.DictField(
            child=serializers.IntegerField(),
            help_text="A queued run's batches by state (queued = in flight).",
        )

        class Meta:
            ref_name = "RunStatus"

    @extend_schema(
        operation_id="runs_retrieve",
        summary="A run's status and counts (operators; signed)",
        description="The same run object as `run_retention --json` prints, plus its batches. "
        "Poll it (each request signed anew) until `status` is no longer `running`.",
        responses={200: OutputSerializer, **error_responses(401, 404)},
        tags=["runs"],
    )
    def get(self, request: Request, run_id: str) -> Response:
        # Parsed here, not by the URL pattern: a malformed id answers this API's 404.
        try:
            run = run_get(run_id=uuid.UUID(run_id))
        except ValueError:
            run = None
        if run is None:
            raise NotFound(f"No run {run_id}.")
        data = {**run_as_json(run), "batches": run_batches_by_state(run)}
        return Response(self.OutputSerializer(data).data)
