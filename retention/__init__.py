"""Lethe: auditable retention and deletion for Django."""
