"""Tests of host models' rows as data classes (issue 14)."""
