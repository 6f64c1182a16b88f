"""CSV in the REST API: rows are written as they are read (``retention.csvstream``).

DRF reserves ``?format=`` for choosing a renderer, so CSV is a renderer
(``format = "csv"``, also chosen by ``Accept: text/csv``) that a view
detects and answers with a StreamingHttpResponse of its own instead of a
rendered body. Errors are rendered as JSON even then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from django.http import StreamingHttpResponse
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from retention.csvstream import csv_response
from retention.reporting import rfc3339


class CSVStreamRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        raise NotImplementedError("CSV is streamed by the view (stream_csv), never rendered")


def _cell(value: Any) -> Any:
    if isinstance(value, datetime):
        return rfc3339(value)
    return "" if value is None else value


def stream_csv(
    *, header: Sequence[str], rows: Iterable[Sequence[Any]], filename: str
) -> StreamingHttpResponse:
    """Receipts as CSV: instants in RFC 3339, lines ending in a bare newline."""
    cells = ([_cell(value) for value in row] for row in rows)
    return csv_response(header, cells, filename=filename, lineterminator="\n")


class CSVStreamMixin:
    """Keep JSON for anything but the streamed body (errors above all)."""

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(response, Response) and isinstance(
            getattr(request, "accepted_renderer", None), CSVStreamRenderer
        ):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
