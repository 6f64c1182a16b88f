"""An API-only host: the project's settings without django.contrib.admin."""

from __future__ import annotations

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "django.contrib.admin"]
ROOT_URLCONF = "tests.hosts.urls_noadmin"
