"""Kept for hosts: the deletions endpoints live in ``retention.rest.deletions``.

The example host imported ``retention.rest.apis.PolicyRefSerializer`` until
issue 27 renamed the module by its subject; a host that copied it keeps
working through this module. Nothing of the app imports it.
"""

from __future__ import annotations

from retention.rest.deletions import (
    CSV_HEADER,
    DataClassReportSerializer,
    DeletionListApi,
    DeletionReportApi,
    OverdueRecordSerializer,
    PolicyRefSerializer,
)

__all__ = [
    "CSV_HEADER",
    "DataClassReportSerializer",
    "DeletionListApi",
    "DeletionReportApi",
    "OverdueRecordSerializer",
    "PolicyRefSerializer",
]
