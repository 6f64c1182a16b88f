"""What each rule of a policy version means, in the words of the class it governs.

A governance owner drafting a version reads the period against what dates the
class's items: an upload for tracked objects, the row's own column (a closing
date, a delivery date) for model rows, or a deadline the host sets. The
engine's knobs (page size, attempts, pacing, the volume breaker's limits) are
folded under "Advanced": most versions keep the defaults, named with their
current values.
"""

from __future__ import annotations

from django import forms

from retention.conf import settings
from retention.rows.registry import row_class

# Rules a reviewer decides; the rest are the engine's and fold away.
ADVANCED_FIELDS: tuple[str, ...] = (
    "batch_size",
    "rate_limit",
    "max_attempts",
    "breaker_max_fraction",
    "breaker_max_multiple",
    "breaker_min_count",
)
ADVANCED_DESCRIPTION = (
    "How the engine paces and protects the deletions. The defaults suit most classes; "
    "change them when an engineer asks."
)


def period_help(data_class: str) -> str:
    """The period's help, phrased for what dates the class's items."""
    examples = "e.g. '30 days', '12 hours', '1 day 6 hours'"
    row = row_class(data_class) if data_class else None
    if row is None and data_class:
        return (
            f"How long each tracked object is kept after it is uploaded ({examples}). "
            "An object keeps the deadline it was given at upload; a new version changes "
            "only the deadlines of objects uploaded after it is approved."
        )
    if row is None:
        return (
            f"How long each item is kept ({examples}): a tracked object from its upload, "
            "a row of a registered model from the date its registration names (such as "
            "a closing or delivery date)."
        )
    if row.by_expiry:
        return (
            f"How long each row of {row.label} is kept ({examples}). Its deadline is the "
            f"row's own '{row.expires_field}', set by the application when the row is "
            "written; a run disposes of rows whose deadline has passed."
        )
    return (
        f"How long each row of {row.label} is kept after its '{row.age_field}' "
        f"({examples}). A run disposes of rows whose '{row.age_field}' is older than "
        "this; a row with no date there is kept."
    )


def _default(name: str, value: object) -> str:
    return f"Empty: the project's default, {value} (setting RETENTION_{name})."


def advanced_help() -> dict[str, str]:
    """Plain help for the engine's knobs, with the defaults as they are now."""
    return {
        "batch_size": "How many items a run takes and disposes of at a time (1 to 10000). "
        "Smaller pages are gentler on a busy database; larger ones are faster.",
        "rate_limit": "At most this many deletions a second, shared by every worker. "
        "Empty: as fast as the store allows.",
        "max_attempts": "How often a run tries an item whose deletion failed for a passing "
        "reason (a timeout, a throttled store) before marking it failed for review. "
        + _default("MAX_ATTEMPTS", settings.MAX_ATTEMPTS),
        "breaker_max_fraction": "The volume breaker stops a run that would delete more than "
        "this share of the class's remaining items (0.25 is a quarter) until an approver "
        "reviews it. " + _default("BREAKER_MAX_FRACTION", settings.BREAKER_MAX_FRACTION),
        "breaker_max_multiple": "… or more than this many times a normal day's deletions "
        "(the median of the last 14 days). "
        + _default("BREAKER_MAX_MULTIPLE", settings.BREAKER_MAX_MULTIPLE),
        "breaker_min_count": "The breaker never stops a run deleting fewer than this many; "
        "raise it for a class whose first sweep is known to be large. "
        + _default("BREAKER_MIN_COUNT", settings.BREAKER_MIN_COUNT),
    }


def explain_rules(form: forms.BaseForm, data_class: str) -> None:
    """Set the rule fields' help on ``form`` for the class it drafts a version of."""
    helps = {"retention_period": period_help(data_class), **advanced_help()}
    for name, text in helps.items():
        if name in form.fields:
            form.fields[name].help_text = text
