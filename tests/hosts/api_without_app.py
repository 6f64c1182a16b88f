"""A host that mounts retention.rest.urls but forgot the sub-app (retention.E015)."""

from __future__ import annotations

from tests.hosts.nodrf import *  # noqa: F403

ROOT_URLCONF = "tests.hosts.urls_api_only"
