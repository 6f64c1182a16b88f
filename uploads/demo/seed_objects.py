"""Seed the uploads (tracked files) of every fate, and say what was seeded."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from django.core.files.base import ContentFile
from django.core.files.storage import storages

from retention import api
from retention.models import PolicyVersion, RetentionRecord
from uploads.demo.formatting import Out, fmt
from uploads.demo.seeds import UPLOADS, UploadSeed
from uploads.models import Upload
from uploads.services import upload_create


def seed_uploads(now: datetime) -> list[tuple[UploadSeed, Upload]]:
    """Each seed written by the host's own upload service, oldest first."""
    uploads: list[tuple[UploadSeed, Upload]] = []
    for seed in sorted(UPLOADS, key=lambda s: -s.age):
        created = now - seed.age
        body = f"demo {seed.data_class} for {seed.tenant_id}, written {fmt(created)}\n"
        upload = upload_create(
            tenant_id=seed.tenant_id,
            data_class=seed.data_class,
            file=ContentFile(body.encode(), name=seed.name),
            now=created,
        )
        uploads.append((seed, upload))
    return uploads


def uploads_touch(uploads: list[tuple[UploadSeed, Upload]], now: datetime) -> tuple[int, int]:
    """Renew the uploads a seed renews, remove the files a seed removes by hand."""
    renewed = removed = 0
    for seed, upload in uploads:
        if seed.renew_age is not None:
            api.renew(upload.retention_record, now=now - seed.renew_age)
            renewed += 1
        if seed.remove_file:
            storages[upload.storage].delete(upload.object_key)
            removed += 1
    return renewed, removed


def uploads_summary(
    out: Out,
    now: datetime,
    versions: list[PolicyVersion],
    uploads: list[tuple[UploadSeed, Upload]],
) -> None:
    """Per class of tracked files: how many, per tenant, and how many past their deadline."""
    out("  Uploads:")
    records = {
        r.pk: r
        for r in RetentionRecord.objects.filter(pk__in=[u.retention_record_id for _, u in uploads])
    }
    for version in versions:
        data_class = version.policy.data_class
        if api.registration(data_class) is not None:
            continue
        mine = [u for _, u in uploads if u.data_class == data_class]
        tenants = Counter(u.tenant_id for u in mine)
        expired = sum(1 for u in mine if records[u.retention_record_id].expires_at <= now)
        per_tenant = ", ".join(f"{t} {n}" for t, n in sorted(tenants.items()))
        out(f"    {data_class}: {len(mine)} ({per_tenant}), {expired} past their deadline")
