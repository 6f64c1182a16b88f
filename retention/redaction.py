"""Field strategies of the ``redact`` disposition: what a column holds once a row is redacted.

A registration names one strategy per field (``redact={"email": Digest()}``);
the engine calls ``apply`` on each value of a due row and writes the result
back. Any plain callable ``f(value) -> new value`` is a strategy too.

Whether a strategy can work on a column is a fact about the model, known
before any row is read: ``problem`` says why not, and the system checks of
``retention.rows.checks`` report it at ``manage.py check``. A strategy whose
result does not depend on the old value lets the engine redact a whole page
with one ``UPDATE ... SET col = constant`` (``sql_constant``).

Pure functions of a value and a field: no query, no model of ``retention``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from django.core.exceptions import ValidationError
from django.db import models

from retention.digest import key_digest

__all__ = [
    "Constant",
    "Digest",
    "Empty",
    "JsonDrop",
    "Mask",
    "Null",
    "Strategy",
    "apply",
    "problem",
    "sql_constant",
    "strategies_for",
    "unique_safe",
]

if TYPE_CHECKING:
    AnyField: TypeAlias = models.Field[Any, Any]

TEXT_FIELDS = (models.CharField, models.TextField)


class Strategy:
    """What a redacted column holds; subclasses say what, and on which columns."""

    # True when distinct inputs stay distinct, so a unique column stays unique.
    unique_safe: ClassVar[bool] = False

    def redact(self, value: Any, field: AnyField) -> Any:
        raise NotImplementedError

    def problem(self, field: AnyField) -> str | None:
        """Why this strategy cannot be applied to ``field``, or None."""
        return None


@dataclass(frozen=True)
class Null(Strategy):
    """NULL: the value is gone. NULLs never collide in a unique index."""

    unique_safe: ClassVar[bool] = True

    def redact(self, value: Any, field: AnyField) -> Any:
        return None

    def problem(self, field: AnyField) -> str | None:
        if not field.null:
            return "the column is NOT NULL (null=False): use Empty() or Constant(...)"
        return None


@dataclass(frozen=True)
class Empty(Strategy):
    """The column's empty value: "" for text and file names; for JSON {} or [], as the value was."""

    def redact(self, value: Any, field: AnyField) -> Any:
        if isinstance(field, models.JSONField):
            if isinstance(value, list):
                return []
            if isinstance(value, str):
                return ""
            return [] if isinstance(field.get_default(), list) else {}
        return ""

    def problem(self, field: AnyField) -> str | None:
        if isinstance(field, (*TEXT_FIELDS, models.JSONField, models.FileField)):
            return None
        return (
            f"a {type(field).__name__} has no empty value; Empty() is for text, "
            "JSON and file fields: use Null() or Constant(...)"
        )


@dataclass(frozen=True)
class Constant(Strategy):
    """One fixed value for every row, e.g. ``Constant("redacted")``."""

    value: Any

    def redact(self, value: Any, field: AnyField) -> Any:
        return self.value

    def problem(self, field: AnyField) -> str | None:
        if self.value is None:
            return None if field.null else "the column is NOT NULL (null=False)"
        try:
            converted = field.to_python(self.value)
        except ValidationError as exc:
            return f"{self.value!r} is not a value of the column: {' '.join(exc.messages)}"
        max_length = field.max_length
        if max_length is not None and isinstance(converted, str) and len(converted) > max_length:
            return (
                f"{self.value!r} has {len(converted)} characters, "
                f"the column holds at most {max_length}"
            )
        return None


@dataclass(frozen=True)
class Digest(Strategy):
    """The HMAC-SHA256 of the value under RETENTION_DIGEST_KEY, hex, cut to max_length.

    Equal values give equal digests, so rows can still be grouped or joined
    on the column; the value itself cannot be read back without the key.
    """

    unique_safe: ClassVar[bool] = True

    def redact(self, value: Any, field: AnyField) -> Any:
        if value is None:
            return None
        digest = key_digest(str(value))
        return digest[: field.max_length] if field.max_length else digest

    def problem(self, field: AnyField) -> str | None:
        return _text_only(self, field)


@dataclass(frozen=True, kw_only=True)
class Mask(Strategy):
    """The value's characters replaced by ``char``, all but the last ``keep_last``.

    A value no longer than ``keep_last`` is masked whole: keeping all of it
    would hide nothing.
    """

    keep_last: int = 0
    char: str = "*"

    def redact(self, value: Any, field: AnyField) -> Any:
        if value is None:
            return None
        text = str(value)
        if len(text) <= self.keep_last:
            return self.char * len(text)
        return self.char * (len(text) - self.keep_last) + text[len(text) - self.keep_last :]

    def problem(self, field: AnyField) -> str | None:
        if isinstance(self.keep_last, bool) or not isinstance(self.keep_last, int):
            return f"keep_last must be a whole number, not {self.keep_last!r}"
        if self.keep_last < 0:
            return f"keep_last must not be negative (it is {self.keep_last})"
        if not isinstance(self.char, str) or len(self.char) != 1:
            return f"char must be one character, not {self.char!r}"
        return _text_only(self, field)


@dataclass(frozen=True, init=False)
class JsonDrop(Strategy):
    """The JSON value without the keys at dotted paths, e.g. ``JsonDrop(["contact.email"])``.

    A path that is not there is fine (rows differ in shape); a list on the
    way is walked element by element, so ``"contacts.email"`` drops the
    email of every contact.
    """

    paths: tuple[str, ...]

    def __init__(self, paths: str | Iterable[str]) -> None:
        object.__setattr__(self, "paths", (paths,) if isinstance(paths, str) else tuple(paths))

    def redact(self, value: Any, field: AnyField) -> Any:
        if not isinstance(value, dict | list):
            return value
        result = copy.deepcopy(value)
        for path in self.paths:
            _drop(result, path.split("."))
        return result

    def problem(self, field: AnyField) -> str | None:
        if not self.paths:
            return "JsonDrop() names no path"
        for path in self.paths:
            if not isinstance(path, str) or not all(path.split(".")):
                return f"{path!r} is not a dotted path of keys, e.g. 'contact.email'"
        if not isinstance(field, models.JSONField):
            return f"JsonDrop() is for JSON fields, not a {type(field).__name__}"
        return None


def _drop(node: Any, keys: list[str]) -> None:
    if isinstance(node, list):
        for item in node:
            _drop(item, keys)
    elif isinstance(node, dict):
        if len(keys) == 1:
            node.pop(keys[0], None)
        elif keys[0] in node:
            _drop(node[keys[0]], keys[1:])


def _text_only(strategy: Strategy, field: AnyField) -> str | None:
    if isinstance(field, TEXT_FIELDS):
        return None
    return f"{type(strategy).__name__}() is for text fields, not a {type(field).__name__}"


def strategies_for(field: Any) -> tuple[type[Strategy], ...] | None:
    """The only strategies ``field`` takes, or None when any may fit it.

    None at all for a many-to-many field, Null() for a relation (any other
    value would point at another row), Empty() or Null() for a file.
    """
    if getattr(field, "many_to_many", False):
        return ()
    if getattr(field, "many_to_one", False) or getattr(field, "one_to_one", False):
        return (Null,)
    if isinstance(field, models.FileField):
        return (Null, Empty)
    return None


def apply(strategy: Strategy | Callable[[Any], Any], value: Any, field: AnyField) -> Any:
    """The value ``field`` holds once redacted by ``strategy``."""
    if isinstance(strategy, Strategy):
        return strategy.redact(value, field)
    if callable(strategy):
        return strategy(value)
    raise TypeError(f"{strategy!r} is not a redaction strategy")


def problem(strategy: Any, field: AnyField) -> str | None:
    """Why ``strategy`` cannot be applied to ``field``, or None when it can.

    A plain callable is trusted on columns of values; on a relation, a file
    or a many-to-many field only the strategies meant for it are accepted.
    """
    allowed = strategies_for(field)
    if allowed == ():
        return "a many-to-many field takes no strategy: its links are rows of another table"
    if not getattr(field, "concrete", True):  # an unbound field has no attribute yet
        return "the field is not a column of the model's table"
    if not isinstance(strategy, Strategy) and not callable(strategy):
        return (
            f"{strategy!r} is not a strategy: give one of retention.redaction "
            "or a callable f(value) -> new value"
        )
    if allowed is not None and not isinstance(strategy, allowed):
        if isinstance(field, models.FileField):
            return (
                "a file field takes only Empty() or Null(); "
                "list it in files= to delete the file itself"
            )
        return "a foreign key takes only Null(): any other value would point at another row"
    if isinstance(strategy, Strategy):
        return strategy.problem(field)
    return None


def unique_safe(strategy: Any) -> bool:
    """True when ``strategy`` keeps distinct values distinct (a unique column stays unique).

    A plain callable is not, unless it says so with ``f.unique_safe = True``.
    """
    return bool(getattr(strategy, "unique_safe", False))


def sql_constant(strategy: Any, field: AnyField | None = None) -> tuple[bool, Any]:
    """Whether the result ignores the old value: ``(True, value)``, else ``(False, None)``.

    Then the engine redacts a page with one ``UPDATE ... SET col = value``.
    Empty() needs the field to know its empty value, and on a JSON field
    follows the old value's shape ({} or []), so it is constant only for text
    and file fields.
    """
    if isinstance(strategy, Null):
        return True, None
    if isinstance(strategy, Constant):
        return True, strategy.value
    if isinstance(strategy, Empty) and isinstance(field, (*TEXT_FIELDS, models.FileField)):
        return True, ""
    return False, None
