"""Where a redacting class of model rows has got to.

Model rows have no tracking row each (SPEC §2), and a redacted row stays in
its table, so something must say which rows are done without scanning them:
every row at or before a class's mark (in ``(time, pk)`` order) is redacted or
listed among its skipped rows, which each run looks at again first.
"""

from __future__ import annotations

from django.db import models


class RowMark(models.Model):
    """Rows of a redacting class up to ``(through_time, through_pk)`` are settled."""

    data_class = models.CharField(max_length=100, unique=True)
    through_time = models.DateTimeField()
    # The host's primary key, as text (its field's to_python reads it back).
    through_pk = models.CharField(max_length=100)
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.data_class} settled through {self.through_time.isoformat()}"


class RowSkip(models.Model):
    """A row of a redacting class behind its mark that is not redacted yet (held, failed)."""

    data_class = models.CharField(max_length=100)
    subject_pk = models.CharField(max_length=100)
    reason = models.CharField(max_length=200)
    since = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["data_class", "subject_pk"], name="retention_rowskip_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.data_class} row {self.subject_pk}: {self.reason}"
