"""The suite mirrors the app: ``tests/<x>/`` tests ``retention/<x>/``.

A test file sits under the folder of the module whose behaviour it names,
even when it drives that behaviour through ``retention.api`` or a command:
the engine's in ``engine/`` (its row engine in ``engine/rows/``,
reconciliation in ``engine/reconcile/``), the evidence writer's in
``chain/``, the services' in ``services/``, the REST sub-app's
(``retention/rest/``) in ``rest/``, the management commands' in
``commands/``; ``test_<m>.py`` at this level tests the root module
``retention/<m>.py`` (``test_api_*`` is ``retention/api.py``), and
``test_docs``, ``test_imports`` and ``test_layout`` the tree as a whole.
pytest runs with ``--import-mode=importlib``, so a basename may repeat in
two folders.

Folders that are not a mirror are integration tests, which need more than
this process: ``queue/`` (a real ``qcluster``), ``install/`` (the wheel in
fresh virtualenvs), ``recipes/`` (real third-party packages), ``uploads/``
(the example host). ``hosts/`` holds the host settings of the import test and
``rowhost/`` the Django app whose models the row tests govern. Shared
helpers and fixtures sit at this level: ``conftest.py``, ``helpers.py``,
``factories.py``, ``fakes.py`` (clocks, queues, guards and disposers that
stand in for time and workers), ``subprocesses.py`` (``manage.py``, private
PostgreSQL clusters from ``pg_template.py``, ``qcluster``), ``motoserver.py``
and ``s3server.py`` (moto in server mode), ``browser.py``, ``settings.py`` and
``qcluster_settings.py``. ``test_host_clocks.py`` tests ``retention/clock.py``.
"""
