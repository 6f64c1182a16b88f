# The two commands of the README: `make demo` and `make test`.
# The newest supported interpreter on the machine is used: Python 3.12
# (Django 6.1) when present, else 3.11 (Django 5.2 LTS).
SUPPORTED_PYTHONS := 3.12 3.11
PYTHON ?= $(shell sh scripts/find-python.sh $(SUPPORTED_PYTHONS))
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_DIR := $(CURDIR)/var/demo
DEMO_ENV := LETHE_VAR_DIR=$(DEMO_DIR) DATABASE_URL= AWS_STORAGE_BUCKET_NAME= REDIS_URL=
PYTEST_ARGS ?=

.PHONY: install demo test lint check-python clean

check-python:
	@if [ -z "$(PYTHON)" ]; then \
		echo "No supported Python found (need one of: $(SUPPORTED_PYTHONS))." >&2; exit 1; fi

$(VENV)/.installed: requirements/base.txt requirements/test.txt pyproject.toml | check-python
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements/test.txt
	touch $@

install: $(VENV)/.installed

demo: install
	rm -rf $(DEMO_DIR)
	$(DEMO_ENV) $(PY) manage.py migrate --noinput -v 0
	$(DEMO_ENV) $(PY) manage.py lethe_demo seed
	@echo; echo "== Dry run: what would be deleted =="
	$(DEMO_ENV) $(PY) manage.py run_retention --dry-run
	@echo; echo "== A governance owner reviewed the dry run and enables enforcement =="
	$(DEMO_ENV) $(PY) manage.py lethe_demo enable
	@echo; echo "== Enforce run =="
	$(DEMO_ENV) $(PY) manage.py run_retention
	@echo; echo "== What was deleted, what survived and why =="
	$(DEMO_ENV) $(PY) manage.py lethe_demo report

# Exit code 5 (no tests collected) is a failure, not a pass.
test: install
	$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing." >&2; exit 1; fi; \
	exit $$rc

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) .venv-* var .pytest_cache
