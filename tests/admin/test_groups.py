"""`retention_setup_groups`: two groups, exactly their permissions, idempotent."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command

from retention.services.governance import APPROVERS_GROUP, AUTHORS_GROUP

pytestmark = pytest.mark.django_db


def _perms(name: str) -> set[str]:
    group = Group.objects.get(name=name)
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}


def _run() -> str:
    out = StringIO()
    call_command("retention_setup_groups", stdout=out)
    return out.getvalue()


def test_setup_groups__creates_both_groups_with_exactly_their_permissions():
    output = _run()

    assert "Retention authors: created with 9 permission(s)." in output
    assert _perms(AUTHORS_GROUP) == {
        "retention.view_policy",
        "retention.view_policyversion",
        "retention.add_policyversion",
        "retention.change_policyversion",
        "retention.view_run",
        "retention.view_legalhold",
        "retention.view_killswitch",
        "retention.view_erasurerequest",
        "retention.add_erasurerequest",
    }
    assert _perms(APPROVERS_GROUP) == {
        "retention.view_policy",
        "retention.change_policy",
        "retention.view_policyversion",
        "retention.approve_policyversion",
        "retention.retire_policyversion",
        "retention.view_run",
        "retention.view_runbatch",
        "retention.view_retentionrecord",
        "retention.view_deletionevent",
        "retention.view_legalhold",
        "retention.add_legalhold",
        "retention.change_legalhold",
        "retention.view_killswitch",
        "retention.change_killswitch",
        "retention.view_breakertrip",
        "retention.view_erasurerequest",
        "retention.approve_erasurerequest",
    }
    # Authors can never approve; nobody may edit the audit trail.
    assert "retention.approve_policyversion" not in _perms(AUTHORS_GROUP)
    assert "retention.approve_erasurerequest" not in _perms(AUTHORS_GROUP)
    for name in (AUTHORS_GROUP, APPROVERS_GROUP):
        assert not {p for p in _perms(name) if p.split(".")[1].startswith(("delete_",))}
        assert not _perms(name) & {
            "retention.change_run",
            "retention.change_deletionevent",
            "retention.change_retentionrecord",
        }


def test_setup_groups__is_idempotent_and_repairs_a_drifted_group():
    _run()
    approvers = Group.objects.get(name=APPROVERS_GROUP)
    approvers.permissions.remove(Permission.objects.get(codename="approve_policyversion"))
    approvers.permissions.add(Permission.objects.get(codename="delete_deletionevent"))

    repaired = _run()
    again = _run()

    assert (
        "Retention approvers: added retention.approve_policyversion; "
        "removed retention.delete_deletionevent." in repaired
    )
    assert again.splitlines() == [
        "Retention authors: already up to date.",
        "Retention approvers: already up to date.",
    ]
    assert Group.objects.filter(name__startswith="Retention").count() == 2
