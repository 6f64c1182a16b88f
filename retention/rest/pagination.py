"""Cursor pagination of receipts: stable under inserts, no OFFSET scans."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination

from retention.rest.exceptions import ApiError


class ReceiptCursorPagination(CursorPagination):
    # Oldest first, in the order receipts were recorded: a client can read
    # everything once and never see a receipt twice or miss one.
    ordering = "id"
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

    def decode_cursor(self, request: Any) -> Any:
        try:
            return super().decode_cursor(request)
        except NotFound:
            # A cursor is a client input, not a resource: 400, not DRF's 404.
            raise ApiError("The cursor is not valid.", code="invalid_cursor") from None


def page_serializer(item: type[serializers.Serializer[Any]], *, ref_name: str) -> type:
    """The response of a cursor-paginated list of ``item``, for the schema."""

    class Meta:
        pass

    Meta.ref_name = ref_name  # type: ignore[attr-defined]
    return type(
        f"{ref_name}Serializer",
        (serializers.Serializer,),
        {
            "next": serializers.URLField(allow_null=True, help_text="The next page, if any."),
            "previous": serializers.URLField(allow_null=True),
            "results": item(many=True),
            "Meta": Meta,
            "__module__": __name__,
        },
    )
