"""The offline verifier: what a tenant runs to check a deletion receipt without us.

A tenant trusts neither Lethe nor its database, so the code that checks a
receipt needs neither: this package imports only the standard library, and
``cryptography`` for a signed head's signature (imported only then). It is
the whole of what a tenant needs beside Python: copy ``retention/__init__.py``
and ``retention/receipts/``, or install the package, and run

    python -m retention.receipts verify receipt.json chain-head.json

(docs/evidence.md, "Verifying a receipt without our code"). The server
hashes and chains its events with the same ``evidence`` module, so what the
tenant checks is what was written. An import-linter contract in
pyproject.toml forbids Django and every other module of ``retention`` here,
and tests/receipts/test_bare_interpreter.py runs the verifier in an
interpreter that has nothing else.

- ``evidence``: how events are hashed, batched into Merkle trees and chained.
- ``signed_heads``: the signed chain head (an anchor): its format, its name
  in a store, checking its Ed25519 signature. Signing is the server's
  (``retention.anchoring.signing``).
- ``verify``: a receipt and a signed head against a chain head file.
- ``certificate``: an erasure request's certificate, its hash, and checking
  it (its signature, and tenant receipts against its events).
- ``cli``, ``__main__``: ``python -m retention.receipts verify|verify-head``.
"""

from retention.receipts.cli import main
from retention.receipts.verify import (
    receipt_signed_head_problems,
    signed_head_check,
    verify_receipt,
)

# The names a tenant's script imported from ``retention.receipts`` when it
# was one module: they stay importable from the package.
__all__ = ["main", "receipt_signed_head_problems", "signed_head_check", "verify_receipt"]
