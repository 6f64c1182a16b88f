"""Tests of chain heads signed and anchored outside the database (issue 17, point 4)."""
