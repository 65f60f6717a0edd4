# The two commands: `make run` (gateway + demo owning service + traffic, with a live status)
# and `make test` (the whole suite). Both set up everything they need first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Reinstall when anything that shapes the installed package changes.
INSTALL_INPUTS := pyproject.toml setup.py $(wildcard proto/argwatch/v1/*.proto)

.PHONY: run test bench lint typecheck clean system-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python $(INSTALL_INPUTS)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

run: $(VENV)/.installed
	$(BIN)/python examples/run_demo.py

# The import tree as installed (argwatch.server -> server/, ...), for mypy.
$(VENV)/typecheck/argwatch: $(BIN)/python
	mkdir -p $@
	ln -sfn $(CURDIR)/proto/argwatch/__init__.py $@/__init__.py
	ln -sfn $(CURDIR)/proto/argwatch/v1 $@/v1
	ln -sfn $(CURDIR)/server $@/server
	ln -sfn $(CURDIR)/tui $@/tui

# System packages the tests use as real parts: redis-server (started by the tests on a
# free loopback port). Installed with apt when missing (CI and developers run as root).
system-deps:
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "installing redis-server with apt-get"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; } \
	  || { echo "redis-server is missing and apt-get failed: install it (Debian: apt-get install redis-server)"; exit 1; }

test: system-deps $(VENV)/.installed typecheck
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

bench: $(VENV)/.installed
	$(BIN)/python bench/validate.py
	$(BIN)/python bench/validate.py --gate
	$(BIN)/python bench/gate.py
	$(BIN)/python bench/refresh.py
	$(BIN)/python bench/status_tui.py

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed $(VENV)/typecheck/argwatch
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info proto/argwatch/v1/*_pb2*.py proto/argwatch/v1/*_pb2*.pyi
