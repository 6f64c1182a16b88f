"""Django admin for the governance owner (SPEC §3.3).

One module per area, so each can grow on its own: policies and versions,
legal holds and the kill switch, the read-only audit trail, the dashboard.
"""

from retention.admin import audit  # noqa: F401
