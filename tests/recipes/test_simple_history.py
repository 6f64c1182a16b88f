"""Recipe: django-simple-history (docs/recipes.md), on a real historical model.

``HistoricalRecords()`` on the host's ``Article`` makes ``HistoricalArticle``;
its rows are dated by ``history_date`` (indexed by the package).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from retention import api
from tests.recipes.host.models import Article
from tests.recipes.recipe import exercise

pytestmark = pytest.mark.django_db

History = Article.history.model


def _changes(article: Article, *days_ago: int, now: datetime) -> list[int]:
    """Save the article once per age given; date each new history row that many days ago."""
    made = []
    for days in days_ago:
        article.title = f"{article.title.split(' v')[0]} v{days}"
        article.save()
        latest = History.objects.filter(id=article.pk).order_by("-history_id").first()
        History.objects.filter(pk=latest.pk).update(history_date=now - timedelta(days=days))
        made.append(latest.pk)
    return made


def test_recipe_simple_history__history_older_than_the_period_goes_the_articles_stay(
    row_registry: Any, make_policy: Any, approver: Any, now: datetime
):
    api.register_model(History, data_class="history.articles", age_field="history_date")
    make_policy("history.articles", timedelta(days=180), batch_size=2)
    first, second = Article.objects.create(title="a"), Article.objects.create(title="b")
    History.objects.update(history_date=now - timedelta(days=400))  # the two creations
    due = set(History.objects.values_list("pk", flat=True))
    due |= set(_changes(first, 300, 200, now=now))
    _changes(first, 100, 1, now=now)
    due |= set(_changes(second, 181, now=now))
    _changes(second, 179, now=now)
    assert len(due) == 5

    exercise(
        model=History,
        data_class="history.articles",
        now=now,
        due=due,
        seed_more=lambda: _changes(second, 250, now=now),
        placed_by=approver,
    )

    # The history goes, never the model whose history it is.
    assert set(Article.objects.values_list("title", flat=True)) == {"a v1", "b v250"}
