"""Django admin for the governance owner (SPEC §3.3).

One module per area, so each can grow on its own: policies and versions,
legal holds, the kill switch, the volume breaker's trips, erasure requests, runs and dry-run
reports, the read-only audit trail, the dashboard. Tenant API keys are the API sub-app's
(``retention/rest/admin.py``).
"""

from retention.admin import (  # noqa: F401
    audit,
    breaker,
    checks,
    erasure,
    holds,
    killswitch,
    policies,
    runs,
    versions,
)
