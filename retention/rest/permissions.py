"""Which principal an endpoint admits."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from retention.rest.authentication import ControlPlanePrincipal, TenantPrincipal


class IsTenant(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.user, TenantPrincipal)


class IsControlPlane(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.user, ControlPlanePrincipal)
