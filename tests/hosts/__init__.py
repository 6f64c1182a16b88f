"""Settings and URLconfs of other kinds of host project than the example's.

A host without ``django.contrib.admin`` (an API-only service) and one without
DRF (the core app alone). The import test and the system-check tests start
fresh interpreters under them.
"""
