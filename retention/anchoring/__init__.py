"""Chain heads signed (Ed25519) and anchored outside the database (SPEC §2).

``signing`` is the signed statement and needs neither Django nor a database
(the tenant's offline verifier uses it); ``stores`` writes statements to a
directory or an S3 bucket and never overwrites one; ``checks`` validates the
settings. The database side (when to anchor, how anchors are compared with
the chain) is ``retention.chain.anchors`` and ``retention.selectors.anchors``.
"""
