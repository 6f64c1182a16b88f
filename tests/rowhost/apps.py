from __future__ import annotations

from django.apps import AppConfig


class RowHostConfig(AppConfig):
    """Host models of the tests of model rows as data classes (issue 14).

    Nothing is registered here: each test registers what it needs and the
    ``row_registry`` fixture forgets it afterwards.
    """

    name = "tests.rowhost"
    label = "rowhost"
    default_auto_field = "django.db.models.BigAutoField"
