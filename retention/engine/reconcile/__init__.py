"""Reconciliation: the store compared with the records, and mirrored holds with the holds.

A run of mode ``reconcile`` lists each storage and walks the listing beside
the records in one key order; what disagrees is a finding, acted on only
once every listing has ended, and reported by digest, never by key.

Modules, one concept each:

- ``act``: the findings, and what is done with them once every listing
  has ended: a ``missing`` record closed as missing, a ``reappeared`` one
  queued again, an orphan reported (or adopted, with ``--adopt``), each
  change under the row's lock;
- ``locks``: records whose object's Object Lock legal hold disagrees with
  the holds, on a storage that mirrors them (reported, never acted on);
- ``row_files``: the files a governed row's ``files`` fields name, merged
  with the listing, so they are no orphans, and those whose row is gone;
- ``run``: ``reconcile_run``, the run itself: per storage the merge of
  listing and records, then the findings acted on and the report.

Imported one way, each module only from those before it: ``act`` ←
``locks``; ``row_files`` (which reads ``retention.engine.rows.files``);
both ← ``run``. The engine's entry point is ``run.reconcile_run``.
"""
