"""System checks of the data map (docs/data-map.md).

retention.E034 and retention.E035 keep RETENTION_EXEMPT_MODELS honest: a
reason for each exemption, a real model behind each label. retention.W008
names the ungoverned models with personal-looking fields; it is a deploy
check, as a new project's ``auth.User`` would otherwise greet every command.
"""

from __future__ import annotations

from typing import Any

from django.core.checks import Error, Warning, register
from django.core.exceptions import ImproperlyConfigured

from retention.selectors.datamap import ungoverned_personal_models, unknown_exempt_labels


@register("retention")
def check_exempt_models(**kwargs: Any) -> list[Error]:
    try:
        unknown = unknown_exempt_labels()
    except ImproperlyConfigured as exc:
        return [
            Error(
                str(exc),
                hint='Give each model its reason: {"app_label.Model": "why no policy governs it"}.',
                id="retention.E034",
            )
        ]
    return [
        Error(
            f"RETENTION_EXEMPT_MODELS names {label!r}, which is no model of this project.",
            hint="Use the model's label, app_label.ModelName (python manage.py "
            "retention_datamap lists them), or remove the entry.",
            id="retention.E035",
        )
        for label in unknown
    ]


@register("retention", deploy=True)
def check_ungoverned_personal_models(**kwargs: Any) -> list[Warning]:
    try:
        found = ungoverned_personal_models()
    except ImproperlyConfigured:
        return []  # retention.E034 says why
    if not found:
        return []
    listed = "; ".join(f"{label} ({', '.join(f.name for f in fields)})" for label, fields in found)
    return [
        Warning(
            f"{len(found)} model{'s' if len(found) != 1 else ''} with personal-looking fields "
            f"no retention policy governs: {listed}.",
            hint="Register each with retention.api.register_model and approve a policy for "
            "its data class, or exempt it with a written reason in RETENTION_EXEMPT_MODELS. "
            "Silencing this check governs nothing (docs/data-map.md).",
            id="retention.W008",
        )
    ]
