from __future__ import annotations

from django.db import models
from simple_history.models import HistoricalRecords


class Article(models.Model):
    """A host model whose changes django-simple-history records."""

    title = models.CharField(max_length=200)
    # No database constraint on history_user: this app has no migrations, so
    # its tables are made before auth_user exists (as tests.rowhost's are).
    history = HistoricalRecords(user_db_constraint=False)

    def __str__(self) -> str:
        return self.title
