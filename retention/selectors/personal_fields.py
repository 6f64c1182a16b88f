"""Which columns of a model look like they hold personal data, and why (the data map).

By type, with ``isinstance`` so a project's own subclass counts: email, IP
address, file and image fields. By name: words that suggest personal data,
the built-in ones and ``RETENTION_PERSONAL_FIELD_NAMES``. A prompt for the
governance owner, not a verdict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import models

from retention.conf import settings

# Words of a field's name that suggest personal data; RETENTION_PERSONAL_FIELD_NAMES adds more.
PERSONAL_FIELD_NAMES: tuple[str, ...] = (
    "name",
    "phone",
    "address",
    "birth",
    "ip",
    "user agent",
    "token",
)
# A word of at least this many letters also matches inside a longer word
# ("username", "telephone", "dateofbirth"); a shorter one ("ip") only whole.
_INSIDE_MIN = 4


@dataclass(frozen=True, slots=True)
class PersonalField:
    """A field that looks like it holds personal data, and why it looks so."""

    name: str
    why: str


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [word for word in re.split(r"[^a-z0-9]+", spaced.lower()) if word]


def _name_matches(words: list[str], phrase: str) -> bool:
    wanted = _words(phrase)
    if not wanted:
        return False
    if len(wanted) > 1:
        size = len(wanted)
        joined = "".join(wanted)
        return joined in words or any(
            words[i : i + size] == wanted for i in range(len(words) - size + 1)
        )
    (word,) = wanted
    if len(word) < _INSIDE_MIN:
        return word in words
    return any(w.startswith(word) or w.endswith(word) for w in words)


def personal_field_names() -> tuple[str, ...]:
    """The built-in words and the host's (``RETENTION_PERSONAL_FIELD_NAMES``)."""
    return tuple(dict.fromkeys((*PERSONAL_FIELD_NAMES, *settings.PERSONAL_FIELD_NAMES)))


def personal_fields(model: type[models.Model]) -> tuple[PersonalField, ...]:
    """The model's columns that look personal: by type (subclasses too), then by name."""
    names = personal_field_names()
    found = []
    for f in model._meta.concrete_fields:
        kind = type(f).__name__
        if isinstance(f, models.EmailField):
            why = f"email address ({kind})"
        elif isinstance(f, models.GenericIPAddressField):
            why = f"IP address ({kind})"
        elif isinstance(f, models.ImageField):
            why = f"image file ({kind})"
        elif isinstance(f, models.FileField):
            why = f"file ({kind})"
        else:
            words = _words(f.name)
            matched = next((phrase for phrase in names if _name_matches(words, phrase)), None)
            if matched is None:
                continue
            why = f"name matches {matched!r}"
        found.append(PersonalField(name=f.name, why=why))
    return tuple(found)
