"""Settings of the test process: the project's, on django-q2's ORM broker.

The project switches to the Redis broker when REDIS_URL is set (as in CI).
The test process itself stays on the ORM broker, so tests that look at queued
tasks see rows in the test database; tests of the Redis broker start a real
``qcluster`` (and the commands feeding it) as subprocesses with the project's
own settings and REDIS_URL.
"""

from __future__ import annotations

from config.settings import *  # noqa: F403
from config.settings import Q_CLUSTER

Q_CLUSTER.pop("redis", None)
Q_CLUSTER["orm"] = "default"

# Host models for the tests of model rows as data classes (issue 14).
INSTALLED_APPS = [*INSTALLED_APPS, "tests.rowhost.apps.RowHostConfig"]  # noqa: F405

# Real third-party apps for the recipes of docs/recipes.md (tests/recipes/),
# and the host app whose model django-simple-history keeps the history of.
INSTALLED_APPS += [
    "simple_history",
    "auditlog",
    "axes",
    "django_celery_results",
    "tests.recipes.host.apps.RecipeHostConfig",
]
# django-axes is here for its models (the recipe seeds them); no login goes
# through it, so it acts on none, and its middleware and backend are not needed.
AXES_ENABLED = False
SILENCED_SYSTEM_CHECKS = ["axes.W002", "axes.W003"]

# One page a batch task, so the in-process queue tests see each page as its
# own task. The default (pages for up to 2 s a task) is what the qcluster
# tests run, and tests/engine/test_batch_slices.py sets its own.
RETENTION_BATCH_SECONDS = 0

# The volume breaker stays on here, whatever the shell exports (benchmarks turn
# it off through the environment): the tests' sweeps are below its minimum
# count (the one that is not gives its version its own limit), and
# tests/engine/test_breaker.py drives it on purpose.
RETENTION_BREAKER_ENABLED = True
