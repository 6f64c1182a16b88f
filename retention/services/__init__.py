"""Every write of the app outside the engine. Interfaces (admin, command, API,
tasks) call these, and the engine's entry points in ``retention.engine``.

The engine uses these; these never import the engine (``triggers``, an old
task path kept for brokers, aside).
"""

from retention.services.breaker import breaker_release
from retention.services.control import (
    enforcement_disable,
    enforcement_enable,
    kill_switch_pause,
    kill_switch_resume,
)
from retention.services.policies import (
    policy_version_approve,
    policy_version_in_force,
    policy_version_propose,
    policy_version_reject,
    policy_version_retire,
    policy_version_submit,
)
from retention.services.records import (
    legal_hold_place,
    legal_hold_release,
    record_failures_retry,
    record_renew,
    record_track,
)

__all__ = [
    "breaker_release",
    "enforcement_disable",
    "enforcement_enable",
    "kill_switch_pause",
    "kill_switch_resume",
    "legal_hold_place",
    "legal_hold_release",
    "policy_version_approve",
    "policy_version_in_force",
    "policy_version_propose",
    "policy_version_reject",
    "policy_version_retire",
    "policy_version_submit",
    "record_failures_retry",
    "record_renew",
    "record_track",
]
