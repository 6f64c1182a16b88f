"""Model rows as data classes: the engine's half of a host's governed tables.

A registered class of rows (``retention.rows.registry``) is disposed of in
pages, each one short transaction on the host's table, by the same run
that deletes tracked objects: swept inline, or one queued batch at a time.

Modules, one concept each:

- ``select``: the due rows, the ``(time, pk)`` keyset after a cursor, the
  page's row locks and timeouts, the holds read inside the page;
- ``evidence``: a page's events (one per row, or one per page) and the row
  keys that make them idempotent;
- ``files``: the objects of a row's ``files`` fields, deleted before it;
- ``dry``: a dry run's rows per tenant, and a sample by row digest;
- ``redact``: a page redacted in place, and the mark before which every
  row is done;
- ``plain``: a page deleted in one statement, where Django's collector
  would do nothing more, and the approved-cascade guard of every delete;
- ``measure``: what a run owes of a class, and the related rows a delete
  would take;
- ``held``: the rows the holds keep, recorded once per run, class, hold
  and tenant once a class is swept;
- ``page``: one page, deleted through Django's collector or redacted;
- ``sweep``: a class's pages in order within a run, with a second lane of
  plain pages beside the engine's;
- ``batch``: a queued batch, the next page of a class after its cursor.

Imported one way, each module only from those before it: ``select``,
``evidence``, ``files``, ``dry`` ← ``redact``, ``plain`` ← ``measure`` ←
``held`` ← ``page`` ← ``sweep``, ``batch``. The rest of the engine enters
through ``sweep`` (inline runs, the queued advance), ``batch`` (queued
batches), ``measure`` and ``dry`` (a run's measure and dry-run report);
reconciliation reads ``files.storage_alias``.
"""
