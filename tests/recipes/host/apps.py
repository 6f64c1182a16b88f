from __future__ import annotations

from django.apps import AppConfig


class RecipeHostConfig(AppConfig):
    """A host model with django-simple-history's history, for the recipe tests.

    Nothing is registered here: each recipe test registers its class and the
    ``row_registry`` fixture forgets it afterwards.
    """

    name = "tests.recipes.host"
    label = "recipehost"
    default_auto_field = "django.db.models.BigAutoField"
