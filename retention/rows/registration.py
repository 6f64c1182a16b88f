"""A registration as data: what a policy version's approver approved besides its rules.

``register_model(...)`` lives in the host's code, and a code change (a new
``scope=``, another age field, a strategy less) would otherwise change what
an approved version disposes of with no new version and no approval. So each
approved version of a row class stores ``registration_of(row)``, and the
engine, ``retention_check`` and the admin compare it with the code's
(``retention.selectors.version_changes``).

The scope is recorded as the SQL it produces (compiled, never run): two
scopes that select the same rows the same way compare equal however they are
written. A scope whose SQL changes from call to call by itself (one that
reads the clock) would differ at every run; it is refused at registration
(``unstable_scope``): time belongs to the class's date field and the run's
cutoff.

A leaf module: it imports nothing of ``retention`` but the registry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time as clock
from collections.abc import Iterable, Mapping
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from uuid import UUID

from django.apps import AppConfig
from django.core.checks import CheckMessage, Error, Tags, register

if TYPE_CHECKING:
    from retention.rows.registry import RowClass

# The parts of a registration, in the order a reviewer reads them.
PARTS: tuple[tuple[str, str], ...] = (
    ("model", "model"),
    ("table", "table"),
    ("age_field", "cut by the rows' own age, column"),
    ("expires_field", "cut by the deadline the host writes, column"),
    ("tenant_field", "tenant column"),
    ("subject_field", "data subject column"),
    ("scope", "scope (the rows the class covers)"),
    ("redact", "redaction strategies"),
    ("files", "files deleted with each row"),
    ("evidence", "evidence"),
)


def stable_repr(value: Any) -> str:
    """A repr that is the same in every process: no memory address.

    A parameter a database adapter wrapped (psycopg's ``Int2(200)``) reads as
    its plain value; a date or time as its ISO form.
    """
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, str):
        return repr(str(value))
    if isinstance(value, bytes):
        return repr(bytes(value))
    if isinstance(value, datetime | date | time | timedelta | Decimal | UUID):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(stable_repr(v) for v in value) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{stable_repr(k)}: {stable_repr(v)}" for k, v in sorted(value.items()))
        return "{" + inner + "}"
    name = getattr(value, "__qualname__", None)
    if name is not None:  # a function, a class
        return f"{getattr(value, '__module__', '?')}.{name}"
    text = repr(value)
    if " at 0x" not in text:
        return text
    kind = type(value)
    state = getattr(value, "__dict__", None)
    fields = "" if not state else stable_repr(dict(state))
    return f"{kind.__module__}.{kind.__qualname__}({fields})"


def scope_sql(row: RowClass) -> tuple[str, list[str]]:
    """The SQL and parameters (as stable reprs) of every row the class covers, not run."""
    qs = row.queryset()
    sql, params = qs.query.get_compiler(using=qs.db).as_sql()
    return str(sql), [stable_repr(p) for p in params]


def registration_of(row: RowClass) -> dict[str, Any]:
    """The registration as JSON-able data: what a version approves about its rows."""
    sql, params = scope_sql(row)
    return {
        "model": row.label,
        "table": str(row.model._meta.db_table),
        "age_field": row.age_field,
        "expires_field": row.expires_field,
        "tenant_field": row.tenant_field,
        "scope": {"sql": sql, "params": params},
        "redact": {name: stable_repr(s) for name, s in sorted(row.redact.items())},
        "files": list(row.files),
        "evidence": row.evidence,
        # Only when set: registrations approved before subject links keep their fingerprint.
        **({"subject_field": row.subject_field} if row.subject_field else {}),
    }


def fingerprint(registration: Mapping[str, Any]) -> str:
    """The SHA-256 of the registration's canonical JSON, hex."""
    canonical = json.dumps(registration, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def unstable_scope(row: RowClass) -> str | None:
    """Why the class's scope cannot be approved, or None: its SQL changes by itself.

    Compiled twice, a moment apart: a scope that reads the clock gives other
    parameters the second time.
    """
    who = f"register_model({row.label}, data_class={row.data_class!r})"
    try:
        first = scope_sql(row)
        clock.sleep(0.002)
        second = scope_sql(row)
    except Exception as exc:
        return f"{who}: its scope cannot be compiled to SQL: {type(exc).__name__}: {exc}"
    if first == second:
        return None
    return (
        f"{who}: its scope gives other SQL each time it is called "
        f"({'; '.join(first[1])} then {'; '.join(second[1])}), as a scope that reads the "
        "clock does. An approved version covers one scope; time belongs to the class's "
        "date field (age_field= or expires_field=) and the run's cutoff, which the "
        "version's retention period sets. Filter on fixed values only."
    )


def _words(part: str, value: Any) -> str:
    if value is None or value == [] or value == {}:
        return "none"
    if part == "scope":
        return _scope_words(str(value.get("sql") or ""), list(value.get("params") or []))
    if part == "redact":
        return "; ".join(f"{name}: {strategy}" for name, strategy in value.items())
    if part == "files":
        return ", ".join(value)
    if part == "evidence":
        return {"per_row": "one event per row", "per_batch": "one event per page"}.get(
            value, str(value)
        )
    return str(value)


def _scope_words(sql: str, params: list[str]) -> str:
    """The scope's condition with its parameters in place: what a reviewer compares."""
    _, where, condition = sql.partition(" WHERE ")
    if not where:
        return "every row the model's default manager returns"
    pieces = condition.split("%s")
    text = pieces[0]
    for i, piece in enumerate(pieces[1:]):
        text += (params[i] if i < len(params) else "?") + piece
    return f"rows where {text}"


def registration_lines(registration: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The registration in words, part by part, for a reviewer."""
    if registration is None:
        return []
    return [(label, _words(part, registration.get(part))) for part, label in PARTS]


def registration_changes(
    approved: Mapping[str, Any] | None, current: Mapping[str, Any]
) -> list[tuple[str, str, str]]:
    """What differs, in words: ``(part, as approved, in the code now)``."""
    if approved is None:
        return [
            (label, "not recorded", _words(part, current.get(part)))
            for part, label in PARTS
            if current.get(part) not in (None, [], {})
        ]
    return [
        (label, _words(part, approved.get(part)), _words(part, current.get(part)))
        for part, label in PARTS
        if approved.get(part) != current.get(part)
    ]


@register("retention", Tags.models)
def check_stable_scopes(
    app_configs: Iterable[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """retention.E032: a scope that reads the clock, registered before ``ready()`` could refuse it.

    Registered with this module, which the registry imports, so the check is
    there whenever a model can be registered.
    """
    from retention.rows.registry import row_classes  # the registry imports this module

    apps_wanted = None if app_configs is None else set(app_configs)
    messages: list[CheckMessage] = []
    for row in sorted(row_classes().values(), key=lambda r: str(r.data_class)):
        if apps_wanted is not None and row.model._meta.app_config not in apps_wanted:
            continue
        problem = unstable_scope(row)
        if problem is not None:
            messages.append(
                Error(
                    problem,
                    hint="Remove the clock from scope=: the class's retention period and "
                    "its age_field or expires_field decide when a row is due.",
                    id="retention.E032",
                )
            )
    return messages
