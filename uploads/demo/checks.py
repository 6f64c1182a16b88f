"""The report's checks: what one says, storage against the ledger, and the verdict."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.files.storage import storages
from django.core.management.base import CommandError

from retention.models import RecordState
from uploads.demo.formatting import Out
from uploads.models import Upload


@dataclass(frozen=True)
class DemoCheck:
    """One check of the report: the line when it holds, the error and details when not."""

    agrees: str
    disagrees: str
    problems: list[str]


def storage_check(uploads: list[Upload]) -> DemoCheck:
    """Deleted uploads have no file; every other upload has its own."""
    disagree = _verify_storage(uploads)
    gone = sum(1 for u in uploads if u.retention_record.state == RecordState.DELETED)
    return DemoCheck(
        agrees=(
            f"storage agrees with the ledger ({gone} deleted upload(s) have no file, "
            f"the other {len(uploads) - gone} have theirs)."
        ),
        disagrees=(
            "storage disagrees with the ledger for upload(s): "
            + ", ".join(str(u.pk) for u, _ in disagree)
        ),
        problems=[f"upload {upload.pk}: {problem}" for upload, problem in disagree],
    )


def _verify_storage(uploads: list[Upload]) -> list[tuple[Upload, str]]:
    problems = []
    for upload in uploads:
        record = upload.retention_record
        present = storages[record.storage].exists(record.object_key)
        if record.state == RecordState.DELETED and present:
            problems.append((upload, "the ledger says deleted, but its file still exists"))
        elif record.state == RecordState.DELETING and record.disposal_started_at:
            continue  # mid-disposal: either answer is possible
        elif record.state != RecordState.DELETED and not present:
            problems.append((upload, f"the ledger says {record.state}, but its file is missing"))
    return problems


def conclude(checks: list[DemoCheck], out: Out, err: Out) -> None:
    """A line for each check that holds; the problems, and an error, for any that does not."""
    failed = [check for check in checks if check.problems]
    for check in checks:
        if not check.problems:
            out(f"Check: {check.agrees}")
    for check in failed:
        for problem in check.problems:
            err(f"  {problem}")
    if failed:
        raise CommandError("; ".join(check.disagrees for check in failed))
