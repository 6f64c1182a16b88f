"""retention.W009: a setting Lethe no longer reads, still set by the host (issue 27)."""

from __future__ import annotations

from retention.conf import RETIRED_SETTINGS
from retention.retired import check_retired_settings


def test_check_w009__a_retired_setting_still_set_is_named(settings):
    settings.RETENTION_DISPATCH_POLL_SECONDS = 0.5

    messages = check_retired_settings()

    assert [m.id for m in messages] == ["retention.W009"]
    assert "RETENTION_DISPATCH_POLL_SECONDS" in messages[0].msg
    assert "no longer reads it" in messages[0].msg


def test_check_w009__silent_when_no_retired_setting_is_set():
    assert "DISPATCH_POLL_SECONDS" in RETIRED_SETTINGS
    assert check_retired_settings() == []


def test_retired_settings__are_gone_from_conf():
    from retention.conf import settings

    for name in RETIRED_SETTINGS:
        assert not hasattr(type(settings), name)
