# K12Vista Studio. The two commands a fresh machine needs:
#   make run    the studio on the embedded default (SQLite + filesystem broker), demo data, http://127.0.0.1:$(PORT)/
#   make test   the whole suite, browser tests included
SHELL := /bin/bash
PORT ?= 8000
VENV ?= .venv
PY := $(VENV)/bin/python
# Django 6 needs Python 3.12 or newer; Debian 12's python3 is 3.11, so look for pyenv's too.
PYTHON ?= $(shell for p in python3.13 python3.12 $(wildcard /root/.pyenv/versions/3.13*/bin/python3) $(wildcard /root/.pyenv/versions/3.12*/bin/python3) python3; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { echo $$p; break; }; done)
TEST_DATA_DIR ?= $(CURDIR)/data/test
PYTEST_ARGS ?=

ML_VENV ?= .venv-ml

.PHONY: run test lint install install-dev chromium ml vendor messages clean

$(VENV)/bin/python:
	@test -n "$(PYTHON)" || { echo "Python 3.12 or newer is needed (none found on PATH or in pyenv)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: install
	mkdir -p data
	DEBUG=1 $(PY) manage.py migrate --noinput
	DEBUG=1 $(PY) manage.py load_demo
	DEBUG=1 PORT=$(PORT) $(PY) manage.py runstudio --port $(PORT)

# Browser tests drive Debian's Chromium; Playwright's own browser download is not used.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Debian's chromium for the browser tests"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# .venv-ml: Python 3.11 with CPU torch and transformers, for the tests' local
# OpenAI-compatible model server (`transformers serve` on a tiny model built at test time).
ml: $(ML_VENV)/.ml-installed
$(ML_VENV)/.ml-installed: scripts/ml-venv.sh
	scripts/ml-venv.sh $(ML_VENV)
	touch $@

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	DEBUG=1 $(VENV)/bin/mypy

# CI lints once and then runs its two suites at the same time, each without the lint: `make test CHECKS=`.
CHECKS ?= lint
test: install-dev chromium ml $(CHECKS)
	rm -rf $(TEST_DATA_DIR)/broker
	mkdir -p $(TEST_DATA_DIR)
	@# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
	DEBUG=1 DATA_DIR=$(TEST_DATA_DIR) $(VENV)/bin/pytest $(PYTEST_ARGS); rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

# Re-copies htmx and KaTeX from the pinned npm packages into static/vendor.
vendor:
	scripts/vendor.sh

messages: install
	DEBUG=1 $(PY) manage.py makemessages -l zh_Hans --ignore=.venv --ignore=node_modules --ignore=data --ignore=static --ignore=bench --ignore=tests
	DEBUG=1 $(PY) manage.py compilemessages --ignore=.venv --ignore=node_modules

clean:
	rm -rf $(VENV) data/test data/test-*
