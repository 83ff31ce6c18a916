# runlane — two commands set everything up on a fresh machine: `make demo`, `make test`.
# `make help` lists the targets: each one's `## text` is its line there.
SHELL := /bin/bash
VENV ?= .venv
DEMO_VENV ?= .venv-demo
PY := $(VENV)/bin/python
PGTAP := /usr/share/postgresql/15/extension/pgtap.control
CHROMEDRIVER := /usr/bin/chromedriver
PGBOUNCER := /usr/sbin/pgbouncer
PLPGSQL_CHECK := /usr/share/postgresql/15/extension/plpgsql_check.control
CITUS := /usr/lib/postgresql/15/lib/citus.so
# Citus's source and build script: no package registry reachable here carries Citus.
CITUS_SOURCE ?= $(firstword $(wildcard $(CURDIR)/../shared/citus /work/shared/citus))
PYTEST_ARGS ?=
# What `make test-fast` leaves out: the soaks, the browser, failover and the long tests
# (markers in pyproject.toml); `make test` runs everything.
FAST_MARKERS := not (soak or browser or failover or slow)
PY_DIRS := runner tests bench soak tools

.PHONY: help setup test test-sql test-fast lint lint-sql lint-py typecheck plpgsql-check \
	format-check format bench demo pg-server soak soak-failover clean node-client

setup: $(VENV)/.installed $(PGTAP) $(CHROMEDRIVER) $(PGBOUNCER) $(CITUS) ## Install everything `make test` needs

help: ## List the targets
	@awk -F ':.*## ' '/^[a-z][a-z-]*:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev,bench]'
	touch $@

# pgTAP comes from Debian's archive; we are root on this kind of machine.
$(PGTAP):
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq postgresql-15-pgtap; \
	else echo "pgTAP missing: run 'sudo apt-get install postgresql-15-pgtap'"; exit 1; fi

# The node example client (clients/node, tested by tests/runner/test_node_client.py): node
# and npm from Debian's archive when missing, then the pinned `pg` from package-lock.json.
NODE_PG := clients/node/node_modules/.package-lock.json

node-client: $(NODE_PG) ## Install node and the node example client's `pg` package

$(NODE_PG): clients/node/package.json clients/node/package-lock.json
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq nodejs npm; \
		else echo "node/npm missing: run 'sudo apt-get install nodejs npm'"; exit 1; fi; fi
	cd clients/node && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Debian's headless chromium and its driver, for the dashboard's browser tests (Selenium
# drives them; no browser is downloaded by anything else).
$(CHROMEDRIVER):
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	else echo "chromium missing: run 'sudo apt-get install chromium chromium-driver'"; exit 1; fi

# Debian's PgBouncer, for tests/runner/test_pgbouncer.py: the tests start their own
# pgbouncer processes (unprivileged user, 127.0.0.1, free ports). The package's own
# service (127.0.0.1:6432) is stopped and disabled: nothing here uses it.
$(PGBOUNCER):
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer \
		&& { systemctl disable --now pgbouncer 2>/dev/null || { service pgbouncer stop; update-rc.d pgbouncer disable; } >/dev/null 2>&1 || true; }; \
	else echo "pgbouncer missing: run 'sudo apt-get install pgbouncer'"; exit 1; fi

# Citus 13.2 built from source into PostgreSQL 15, for tests/runner/test_citus_coordinator.py
# (a coordinator and two worker nodes on loopback). The build also installs
# postgresql-server-dev-15, which brings the server to Debian's current 15.x.
$(CITUS):
	@if [ -z "$(CITUS_SOURCE)" ]; then echo "Citus's source is missing: set CITUS_SOURCE to the folder holding install.sh"; exit 1; fi
	@if [ "$$(id -u)" = 0 ]; then "$(CITUS_SOURCE)/install.sh"; \
	else echo "Citus missing: run 'sudo $(CITUS_SOURCE)/install.sh'"; exit 1; fi

# Debian's plpgsql_check, for `make plpgsql-check` (tools/plpgsql_lint.py).
$(PLPGSQL_CHECK):
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq postgresql-15-plpgsql-check; \
	else echo "plpgsql_check missing: run 'sudo apt-get install postgresql-15-plpgsql-check'"; exit 1; fi

test: setup node-client ## The whole suite, as CI runs it (installs chromium, pgbouncer, node)
	$(VENV)/bin/pytest $(PYTEST_ARGS)

test-sql: $(VENV)/.installed $(PGTAP) ## The pgTAP files only (tests/sql)
	$(VENV)/bin/pytest tests/sql $(PYTEST_ARGS)

test-fast: $(VENV)/.installed $(PGTAP) $(PGBOUNCER) node-client ## All but the soak, browser, failover and slow tests
	$(VENV)/bin/pytest -m '$(FAST_MARKERS)' $(PYTEST_ARGS)

# The format check runs last, so a formatting difference never hides another finding.
lint: lint-sql lint-py typecheck plpgsql-check format-check ## Every check CI runs after the tests

lint-sql: $(VENV)/.installed ## sqlfluff over sql/ and tests/sql
	$(VENV)/bin/sqlfluff lint sql tests/sql
	# The older generation's statements carry %(name)s parameters: lint them templated.
	$(VENV)/bin/sqlfluff lint --templater placeholder --disregard-sqlfluffignores sql/legacy

lint-py: $(VENV)/.installed ## ruff check over the Python
	$(VENV)/bin/ruff check $(PY_DIRS)

typecheck: $(VENV)/.installed ## mypy over runner/ (configured in pyproject.toml)
	$(VENV)/bin/mypy

plpgsql-check: $(VENV)/.installed $(PLPGSQL_CHECK) ## plpgsql_check over every PL/pgSQL function
	$(PY) tools/plpgsql_lint.py

# One line per file (`make format` rewrites them; `ruff format --diff` shows the changes).
format-check: $(VENV)/.installed ## ruff format --check over the Python
	RUFF_OUTPUT_FORMAT=concise $(VENV)/bin/ruff format --check $(PY_DIRS)

format: $(VENV)/.installed ## Format the Python with ruff format
	$(VENV)/bin/ruff format $(PY_DIRS)

# The demo installs the package alone (no test or benchmark extras, no pgTAP) into its
# own venv; it needs a PostgreSQL server on the machine and starts its own throwaway
# cluster (as an unprivileged user when run as root: runlane/pgcluster.py).
demo: $(DEMO_VENV)/.installed pg-server ## The demo on an embedded PostgreSQL (own venv)
	$(DEMO_VENV)/bin/runlane demo

$(DEMO_VENV)/.installed: pyproject.toml
	python3 -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/pip install -q --upgrade pip
	$(DEMO_VENV)/bin/pip install -q -e .
	touch $@

# PostgreSQL's server binaries (pg_ctl), from Debian's archive when missing and we are root.
pg-server: ## PostgreSQL's server binaries, when missing
	@if [ -n "$$RUNLANE_PG_BINDIR" ] || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 \
		|| command -v pg_ctl >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq postgresql; \
	else echo "PostgreSQL server missing: run 'sudo apt-get install postgresql'"; exit 1; fi

soak: setup ## The chaos soak (soak/chaos.py)
	$(VENV)/bin/python -m soak.chaos

# Failover to a streaming standby (soak/failover.py): sync, then async; the figures are in
# docs/reliability.md (section 21). Exit 1 on any violation; what an async standby loses
# (acknowledged commits it never received) is counted and printed, not a violation.
soak-failover: setup ## Failovers to a streaming standby, sync then async
	$(VENV)/bin/python -m soak.failover

bench: setup ## The benchmarks (docs/benchmarks.md)
	$(PY) -m bench

clean: ## Remove the venvs, the caches and node_modules
	rm -rf $(VENV) $(DEMO_VENV) .pytest_cache .mypy_cache clients/node/node_modules
