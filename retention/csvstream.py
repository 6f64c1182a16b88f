"""CSV that streams: one writer for the admin's exports and the REST API's receipts.

A leaf module: the admin and the REST sub-app both import it, and the core app
needs neither of them. Rows are written as they are read and sent in bounded
chunks, so a download of millions of rows keeps memory flat. The header goes
out alone first: the download starts before the first rows are read. Callers
format their own cells (the REST API writes instants as RFC 3339; the csv
module writes None as an empty cell).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django.http import StreamingHttpResponse

CHUNK_BYTES = 64 * 1024


def csv_chunks(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    rows_per_chunk: int | None = None,
    lineterminator: str = "\r\n",
) -> Iterator[bytes]:
    """Yield the header, then the rows in chunks of ``rows_per_chunk`` rows or
    about ``CHUNK_BYTES``, whichever comes first."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator=lineterminator)

    def take() -> bytes:
        value = buffer.getvalue().encode()
        buffer.seek(0)
        buffer.truncate()
        return value

    writer.writerow(header)
    yield take()
    pending = 0
    for row in rows:
        writer.writerow(row)
        pending += 1
        if buffer.tell() >= CHUNK_BYTES or (rows_per_chunk and pending >= rows_per_chunk):
            yield take()
            pending = 0
    if pending:
        yield take()


def csv_response(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    filename: str,
    rows_per_chunk: int | None = None,
    lineterminator: str = "\r\n",
) -> StreamingHttpResponse:
    """A download of the rows as ``filename``, streamed by :func:`csv_chunks`."""
    response = StreamingHttpResponse(
        csv_chunks(header, rows, rows_per_chunk=rows_per_chunk, lineterminator=lineterminator),
        content_type="text/csv; charset=utf-8",
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
