from django.apps import AppConfig


class UploadsConfig(AppConfig):
    name = "uploads"
    default_auto_field = "django.db.models.BigAutoField"
