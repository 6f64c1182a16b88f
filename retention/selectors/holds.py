"""Holds as filters over records, built on the one coverage rule.

``LegalHold.objects.covering()`` says which holds protect a record; the
engine's claims and re-checks use it through ``RecordQuerySet.held()`` (a
correlated EXISTS). Aggregates over a whole class (dashboard, impact preview)
turn the few active holds into a plain boolean over the record's columns
instead (``held_q``), so a conditional count over a million rows costs one scan.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce
from operator import or_

from django.db.models import Q

from retention.models import LegalHold, RetentionRecord


def held_q(data_class: str) -> Q | None:
    """A filter matching the records of ``data_class`` under an active hold.

    ``None`` when no active hold can touch the class. Matches exactly what
    ``RecordQuerySet.held()`` matches for records of that class.
    """
    scopes = [hold.scope_q() for hold in LegalHold.objects.covering(data_class=data_class)]
    if not scopes:
        return None
    return reduce(or_, scopes)


def held_record_ids(record_ids: Iterable[int]) -> set[int]:
    """Which of these records an active hold protects, as the holds are now."""
    ids = list(record_ids)
    if not ids:
        return set()
    return set(RetentionRecord.objects.filter(id__any_of=ids).held().values_list("id", flat=True))
