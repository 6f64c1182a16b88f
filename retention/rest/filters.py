"""Query filters of the endpoints: strict, so a typo is a 400 rather than a wider result."""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework import serializers


class QueryFilterSerializer(serializers.Serializer[Any]):
    """Query filters, strictly: views pass ``query_params.dict()``, so an empty
    value (``?since=``) is an error rather than absent (DRF's reading of a
    QueryDict), and an unknown parameter (``?sinse=``) is refused rather than
    silently widening the result."""

    # Parameters read elsewhere: DRF's renderer choice and the paginator.
    other_params: ClassVar[frozenset[str]] = frozenset({"format"})

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        unknown = set(self.initial_data) - set(self.fields) - self.other_params
        if unknown:
            raise serializers.ValidationError(
                dict.fromkeys(sorted(unknown), "Unknown query parameter.")
            )
        return attrs


class PeriodFilterSerializer(QueryFilterSerializer):
    since = serializers.DateTimeField(
        required=False, help_text="Deleted at or after this time (RFC 3339)."
    )
    until = serializers.DateTimeField(
        required=False,
        help_text="Deleted before this time (RFC 3339); must be later than `since` "
        "(400 `invalid` otherwise).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        since, until = attrs.get("since"), attrs.get("until")
        # An empty window (equal) is refused with a reversed one: both are mistakes.
        if since and until and since >= until:
            raise serializers.ValidationError({"until": "must be later than since."})
        return attrs
