"""The governance page says what a governance user needs (issue 30, point 4):
the staff flag, and each group's permissions exactly as retention_setup_groups
gives them."""

from __future__ import annotations

import re
from pathlib import Path

from retention.services.governance import APPROVERS_GROUP, AUTHORS_GROUP, GROUP_PERMISSIONS

PAGE = Path(__file__).resolve().parent.parent / "docs" / "governance.md"


def _section() -> str:
    return PAGE.read_text().split("## Who may do what", 1)[1].split("\n## ", 1)[0]


def test_docs_governance__names_the_staff_flag_and_the_command_that_makes_the_groups() -> None:
    section = _section()

    assert "`is_staff`" in section
    assert "`is_active`" in section
    assert "`is_superuser`" in section
    assert "retention_setup_groups" in section


def test_docs_governance__lists_exactly_each_groups_permissions() -> None:
    rows = {
        match["group"]: set(re.findall(r"`(\w+)`", match["perms"]))
        for match in re.finditer(
            r"^\| (?P<group>Retention \w+) \| (?P<perms>`.*) \|$", _section(), re.M
        )
    }

    assert rows == {
        AUTHORS_GROUP: set(GROUP_PERMISSIONS[AUTHORS_GROUP]),
        APPROVERS_GROUP: set(GROUP_PERMISSIONS[APPROVERS_GROUP]),
    }
