"""Every write of the app. Interfaces (admin, command, API, tasks) call these."""

from retention.services.control import (
    enforcement_disable,
    enforcement_enable,
    kill_switch_pause,
    kill_switch_resume,
)
from retention.services.dispatch import (
    batch_dispose,
    run_dispatch,
    run_enqueue,
    run_schedule_fire,
    runs_resume_stalled,
)
from retention.services.policies import (
    policy_version_approve,
    policy_version_in_force,
    policy_version_propose,
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
from retention.services.runs import claim_dispose, records_claim, run_execute, run_start

__all__ = [
    "batch_dispose",
    "claim_dispose",
    "enforcement_disable",
    "enforcement_enable",
    "kill_switch_pause",
    "kill_switch_resume",
    "legal_hold_place",
    "legal_hold_release",
    "policy_version_approve",
    "policy_version_in_force",
    "policy_version_propose",
    "policy_version_retire",
    "policy_version_submit",
    "record_failures_retry",
    "record_renew",
    "record_track",
    "records_claim",
    "run_dispatch",
    "run_enqueue",
    "run_execute",
    "run_schedule_fire",
    "run_start",
    "runs_resume_stalled",
]
