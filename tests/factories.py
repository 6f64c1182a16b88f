from __future__ import annotations

from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    is_staff = True


def approver_user(username: str) -> Any:
    user = UserFactory(username=username)
    user.user_permissions.add(
        Permission.objects.get(
            content_type__app_label="retention", codename="approve_policyversion"
        )
    )
    # has_perm caches; a fresh instance sees the new permission.
    return get_user_model().objects.get(pk=user.pk)
