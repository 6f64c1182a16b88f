"""The anchored heads against the database's chain: rollbacks, rewrites, bad signatures.

Reads only: the anchors are written by ``retention.chain.anchors``. The
chain itself is verified by ``retention.selectors.evidence.chain_verify``;
this compares what the database says now with what was signed earlier,
which catches what a consistent rewrite or a restore leaves intact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from retention.anchoring.signing import Signer, signer_load
from retention.anchoring.stores import AnchorStore, AnchorStoreError, location_parse
from retention.conf import settings
from retention.formatting import human, human_text
from retention.models import ChainHead, EventBatch
from retention.receipts.signed_heads import (
    AnchorError,
    SignedHead,
    head_parse,
    head_verify,
    name_seq,
)

# Anchors' batches are looked up this many at a time (SQLite's parameter limit).
_CHUNK = 500


def anchoring_on() -> bool:
    """Both settings given; a malformed one counts as given (its check reports it)."""
    if not settings.SIGNING_KEY:
        return False
    try:
        return location_parse(settings.EVIDENCE_ANCHOR) is not None
    except ValueError:
        return True


@dataclass(frozen=True, slots=True)
class AnchorStatus:
    head_seq: int
    anchored_seq: int
    anchored_at: datetime | None

    @property
    def unanchored(self) -> int:
        """Batches appended since the last anchor."""
        return max(self.head_seq - self.anchored_seq, 0)


def anchor_status() -> AnchorStatus:
    """The chain head and its last anchor, as the database records them."""
    row = ChainHead.objects.filter(pk=1).values_list("seq", "anchored_seq", "anchored_at").first()
    return AnchorStatus(*row) if row else AnchorStatus(0, 0, None)


def signing_key() -> Signer | None:
    """The configured signer (RETENTION_SIGNING_KEY), or None when it is unset or unusable."""
    if not settings.SIGNING_KEY:
        return None
    try:
        return signer_load(settings.SIGNING_KEY)
    except AnchorError:
        return None  # check retention.E029 reports it


@dataclass(slots=True)
class AnchorsCheck:
    store: str
    anchors: int = 0  # files found
    trusted: int = 0  # with a good signature of a trusted key
    first_seq: int | None = None
    last_seq: int | None = None
    head_seq: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def anchors_check(*, store: AnchorStore, public_keys: Mapping[str, bytes]) -> AnchorsCheck:
    """Every anchor of ``store``, its signature checked, against the database's chain.

    - an anchor of a batch after the database's chain head: a rollback (the
      database was restored from a dump older than the anchor);
    - an anchor whose chain hash differs from the database's batch of the
      same seq, or whose batch is gone: a rewrite;
    - a bad signature, a key that is not trusted, an unreadable or misnamed
      file, an anchor the database recorded but the store does not hold.
    """
    head = ChainHead.objects.filter(pk=1).first()
    head_seq = head.seq if head else 0
    check = AnchorsCheck(store=store.description, head_seq=head_seq)
    names = store.names()
    check.anchors = len(names)
    trusted: list[SignedHead] = []
    for name in names:
        try:
            signed = head_parse(store.get(name))
        except (AnchorError, AnchorStoreError) as exc:
            check.problems.append(f"anchor {name} cannot be read: {exc}")
            continue
        if signed.seq != name_seq(name):
            check.problems.append(f"anchor {name} holds the head of batch {signed.seq}")
            continue
        wrong = head_verify(signed, public_keys)
        if wrong is not None:
            check.problems.append(f"anchor {signed.seq}: {wrong}")
            continue
        trusted.append(signed)
    check.trusted = len(trusted)
    if trusted:
        check.first_seq, check.last_seq = trusted[0].seq, trusted[-1].seq
    ahead = [a for a in trusted if a.seq > head_seq]
    if ahead:
        more = f"; {len(ahead)} anchors are ahead of it" if len(ahead) > 1 else ""
        check.problems.append(
            f"rollback: the database is behind anchor {ahead[-1].seq} (its chain head is "
            f"at batch {head_seq}{more}; anchored {human_text(ahead[-1].anchored_at)})"
        )
    within = [a for a in trusted if a.seq <= head_seq]
    chains: dict[int, str] = {}
    for start in range(0, len(within), _CHUNK):
        seqs = [a.seq for a in within[start : start + _CHUNK]]
        chains.update(EventBatch.objects.filter(seq__in=seqs).values_list("seq", "chain"))
    for anchor in within:
        recorded = chains.get(anchor.seq)
        if recorded is None:
            check.problems.append(f"rewrite: batch {anchor.seq} was anchored and is gone")
        elif recorded != anchor.chain:
            check.problems.append(f"rewrite: batch {anchor.seq} disagrees with its anchor")
    anchored = head.anchored_seq if head else 0
    if anchored and anchored <= head_seq and anchored not in {name_seq(n) for n in names}:
        check.problems.append(
            f"anchor {anchored} is not in the store, though the database recorded it as "
            f"anchored at {human(head.anchored_at if head else None)}"
        )
    return check
