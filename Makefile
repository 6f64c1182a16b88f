# The two commands of the README: `make demo` and `make test`; `make bench`
# prints the performance figures.
# The newest supported interpreter on the machine is used: Python 3.12
# (Django 6.1) when present, else 3.11 (Django 5.2 LTS).
SUPPORTED_PYTHONS := 3.12 3.11
PYTHON ?= $(shell sh scripts/find-python.sh $(SUPPORTED_PYTHONS))
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_DIR := $(CURDIR)/var/demo
DEMO_ENV := LETHE_VAR_DIR=$(DEMO_DIR) DATABASE_URL= AWS_STORAGE_BUCKET_NAME= REDIS_URL=
PYTEST_ARGS ?=

.PHONY: install demo test lint contracts docs typecheck bench check-bench-database check-python clean

check-python:
	@if [ -z "$(PYTHON)" ]; then \
		echo "No supported Python found (need one of: $(SUPPORTED_PYTHONS))." >&2; exit 1; fi

$(VENV)/.installed: requirements/base.txt requirements/test.txt requirements/docs.txt requirements/lint.txt pyproject.toml | check-python
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements/test.txt -r requirements/docs.txt
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
	@echo; echo "== The data map: every model governed, exempt with a reason, or internal =="
	$(DEMO_ENV) $(PY) manage.py retention_datamap --strict
	@echo; echo "== Erasure requests: a customer asks to be forgotten, a tenant's contract ends =="
	$(DEMO_ENV) $(PY) manage.py lethe_demo erase
	$(DEMO_ENV) $(PY) manage.py run_retention --erasures
	@echo; echo "== Each request's certificate, checked offline =="
	$(DEMO_ENV) $(PY) manage.py lethe_demo certificates --out $(DEMO_DIR)/certificates
	for f in $(DEMO_DIR)/certificates/certificate-*.json; do $(PY) -m retention.receipts verify "$$f" || exit 1; done

# Exit code 5 (no tests collected) is a failure, not a pass.
test: install
	$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing." >&2; exit 1; fi; \
	exit $$rc

# The figures of SPEC §5, each printed by its script in benchmarks/. Every
# script makes a fresh database next to DATABASE_URL's (PostgreSQL: claims,
# SKIP LOCKED and the shared rate gate are what is measured) and starts its
# own moto S3 server. One script: make bench BENCHMARKS=queries
BENCHMARKS ?= throughput claim_scale memory queries chain_cost rate_gate rows reconcile scale_out

check-bench-database:
	@case "$$DATABASE_URL" in \
		postgres://*|postgresql://*|pgsql://*|postgis://*) ;; \
		*) echo "make bench needs DATABASE_URL to name a PostgreSQL database, e.g." \
			"DATABASE_URL=postgres://postgres@127.0.0.1:5432/lethe_bench make bench" \
			"(it is '$$DATABASE_URL')." >&2; exit 1;; \
	esac

# Checked before installing: no point in a venv when there is no database.
bench: check-bench-database install
	@failed=; for name in $(BENCHMARKS); do \
		echo; echo "== benchmarks/$$name.py =="; \
		$(PY) benchmarks/$$name.py || failed="$$failed $$name"; \
	done; \
	if [ -n "$$failed" ]; then echo; echo "make bench: missed a target or failed:$$failed" >&2; exit 1; fi

# The documentation site (docs/, mkdocs.yml) into var/site/. --strict: any
# warning, such as a link to a missing page or anchor, fails the build (not
# with --quiet, which hides the warnings from --strict's count too).
docs: install
	$(VENV)/bin/mkdocs build --strict

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The import contracts of pyproject.toml: models <- selectors <- chain <- services <-
# engine <- interfaces; the core imports neither the REST API nor the admin.
contracts: install
	$(VENV)/bin/lint-imports

# mypy --strict with django-stubs over retention/ ([tool.mypy] in pyproject.toml).
typecheck: install
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .venv-* var .pytest_cache
