"""Reads and reusable filters. Tenant scoping lives here, never in views."""
