# runlane — two commands set everything up on a fresh machine: `make demo`, `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PGTAP := /usr/share/postgresql/15/extension/pgtap.control
PYTEST_ARGS ?=

.PHONY: setup test lint bench demo soak clean

setup: $(VENV)/.installed $(PGTAP)

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev,bench]'
	touch $@

# pgTAP comes from Debian's archive; we are root on this kind of machine.
$(PGTAP):
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq postgresql-15-pgtap; \
	else echo "pgTAP missing: run 'sudo apt-get install postgresql-15-pgtap'"; exit 1; fi

test: setup
	$(VENV)/bin/pytest $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/sqlfluff lint sql tests/sql
	# The older generation's statements carry %(name)s parameters: lint them templated.
	$(VENV)/bin/sqlfluff lint --templater placeholder --disregard-sqlfluffignores sql/legacy
	$(VENV)/bin/ruff check runner tests bench soak

demo: setup
	$(VENV)/bin/runlane demo

soak: setup
	$(VENV)/bin/python -m soak.chaos

bench: setup
	$(PY) -m bench

clean:
	rm -rf $(VENV) .pytest_cache
