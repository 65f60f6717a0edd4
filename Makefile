# The two commands: `make run` (gateway + demo owning service + traffic, with a live status)
# and `make test` (the whole suite). Both set up everything they need first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Reinstall when anything that shapes the installed package changes.
INSTALL_INPUTS := pyproject.toml setup.py $(wildcard proto/argwatch/v1/*.proto)

.PHONY: run test bench lint typecheck clean

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

test: $(VENV)/.installed typecheck
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

bench: $(VENV)/.installed
	$(BIN)/python bench/validate.py

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed $(VENV)/typecheck/argwatch
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info proto/argwatch/v1/*_pb2*.py proto/argwatch/v1/*_pb2*.pyi
