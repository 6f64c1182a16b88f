"""The evidence writer: deletion events appended to the hash chain, and its head anchored.

Modules:

- ``events``: events appended in batches (their leaves hashed into a Merkle
  root chained to the previous batch), once per idempotency key, under one
  short lock of the chain head;
- ``row_keys``: the idempotency keys of rows' events under a page event,
  recorded before the chain's lock;
- ``anchors``: the chain head signed and written outside the database when a
  run closes and by the watchdog.

Why a layer of its own, between the selectors and the services: the chain
records what was done; it never decides what to delete. It needs only the
models, a few reads (``retention.selectors.evidence``,
``retention.selectors.anchors``) and the hashing of the offline verifier
(``retention.receipts.evidence``), and every writer may append to it: the engine for
each disposal, the watchdog's task for anchors. Filed under the services,
the engine (which sits above the services) had to import services for its
every event; here both import it from below, and imports run one way:
models ← selectors ← chain ← services ← engine ← interfaces.
Reads of the chain (verifying it, receipts, comparing anchors) are
selectors: ``retention.selectors.evidence`` and ``retention.selectors.anchors``.
"""
