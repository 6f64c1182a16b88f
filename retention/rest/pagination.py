"""Cursor pagination of receipts: stable under inserts, no OFFSET scans."""

from __future__ import annotations

import binascii
import re
from base64 import b64decode
from typing import Any
from urllib.parse import parse_qs

from django.db.models import BigIntegerField, ExpressionWrapper, F, QuerySet
from django.db.models.functions import Coalesce
from rest_framework import serializers
from rest_framework.pagination import Cursor, CursorPagination

from retention.models import DeletionEvent
from retention.rest.exceptions import ApiError

MAX_PAGE_SIZE = 1000
# A receipt's place in the order receipts commit in: its batch's ``seq``
# (chain heads are linked, and batches committed, in that order), then its
# leaf. Spelled in a cursor as "c" and the number.
POSITION = "commit_position"
LEAVES = 2**32
_POSITION = re.compile(r"c[0-9]{1,19}")
# A cursor written before, over ``ordering = "id"``: a receipt's id.
_LEGACY_POSITION = re.compile(r"[0-9]{1,19}")
_OFFSET = re.compile(r"[0-9]{1,9}")
_ID_MAX = 2**63 - 1


def commit_ordered(receipts: QuerySet[DeletionEvent]) -> QuerySet[DeletionEvent]:
    """``receipts`` with their place in commit order (``POSITION``)."""
    position = ExpressionWrapper(
        Coalesce(F("batch__seq"), 0) * LEAVES + Coalesce(F("leaf_index"), 0),
        output_field=BigIntegerField(),
    )
    return receipts.annotate(**{POSITION: position})


def _invalid() -> ApiError:
    # A cursor is a client input, not a resource: 400, not DRF's 404.
    return ApiError(
        "The cursor is not valid; use a `next` or `previous` link as given.",
        code="invalid_cursor",
    )


class ReceiptCursorPagination(CursorPagination):
    # Oldest first, in the order receipts were committed: a client can read
    # everything once and never see a receipt twice or miss one. (Event ids
    # are drawn before a page's events are chained, so a lower id can commit
    # after a higher one; a batch's ``seq`` cannot.)
    ordering = POSITION

    def paginate_queryset(self, queryset: Any, request: Any, view: Any = None) -> Any:
        return super().paginate_queryset(commit_ordered(queryset), request, view)

    def encode_cursor(self, cursor: Cursor) -> str:
        if cursor.position is not None:
            cursor = cursor._replace(position=f"c{cursor.position}")  # type: ignore[arg-type]
        return super().encode_cursor(cursor)

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE

    def decode_cursor(self, request: Any) -> Cursor | None:
        """Only a cursor this paginator could have written; DRF's own decoder
        reads an empty or garbled one as the first page, and passes any
        position to the database."""
        encoded = request.query_params.get(self.cursor_query_param)
        if encoded is None:
            return None
        try:
            text = b64decode(encoded.encode("ascii"), validate=True).decode("ascii")
            tokens = parse_qs(text, keep_blank_values=True, strict_parsing=True)
        except (UnicodeError, binascii.Error, ValueError):
            raise _invalid() from None
        if not tokens or set(tokens) - {"o", "r", "p"} or any(len(v) != 1 for v in tokens.values()):
            raise _invalid()
        offset = tokens.get("o", ["0"])[0]
        reverse = tokens.get("r", ["0"])[0]
        position = tokens.get("p", [None])[0]
        if not _OFFSET.fullmatch(offset) or reverse not in ("0", "1"):
            raise _invalid()
        if position is not None:
            position = _position(position)
        # DRF compares positions as strings (str() of the instance's value); the stubs say int.
        return Cursor(
            offset=min(int(offset), self.offset_cutoff),
            reverse=reverse == "1",
            position=position,  # type: ignore[arg-type]
        )


def _position(text: str) -> str:
    """A cursor's position as a commit position; an old cursor's receipt id, translated."""
    if _POSITION.fullmatch(text) and int(text[1:]) <= _ID_MAX:
        return text[1:]
    if not (_LEGACY_POSITION.fullmatch(text) and int(text) <= _ID_MAX):
        raise _invalid()
    # Cursors issued before receipts were paged in commit order hold the id
    # of the last receipt read: go on after that receipt's place.
    place = (
        commit_ordered(DeletionEvent.objects.filter(pk=int(text)))
        .values_list(POSITION, flat=True)
        .first()
    )
    if place is None:
        raise _invalid()
    return str(place)


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
