"""The REST API (SPEC §3.2): reusable pieces and the app's own endpoints.

Host apps build their endpoints from the same pieces (``TenantApiView``, the
error format, the tenant-scoped selectors) and mount ``retention.rest.urls``.
"""
