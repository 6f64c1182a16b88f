"""Tests of the offline verifier, ``retention.receipts`` (issue 27, point 2)."""
