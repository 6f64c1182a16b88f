"""Chain heads signed (Ed25519) and anchored outside the database (SPEC §2).

``signing`` signs the statement, whose format and check are the offline
verifier's (``retention.receipts.signed_heads``); ``stores`` writes statements to a
directory or an S3 bucket and never overwrites one; ``checks`` validates the
settings. The database side (when to anchor, how anchors are compared with
the chain) is ``retention.chain.anchors`` and ``retention.selectors.anchors``.
"""
