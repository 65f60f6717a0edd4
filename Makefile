# The two commands: `make run` (gateway + demo owning service + traffic, with the TUI on it)
# and `make test` (the whole suite). Both set up everything they need first.
# `make check` is the quick loop: lint and the unit tests, in well under a minute.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Every dependency and tool at the exact version CI ran (pip-compile's output; `make lock` refreshes it).
LOCK := requirements/test.lock
# Reinstall when anything that shapes the installed package changes.
INSTALL_INPUTS := pyproject.toml setup.py $(LOCK) $(wildcard proto/argwatch/v1/*.proto)

.PHONY: run test check bench lint typecheck clean system-deps bench-deps proto-release ts-client fuzz soak gameday docs lock

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The lock first (argwatch's own dependencies and every extra's tools, pinned), then argwatch itself
# on top without resolving again, so nothing newer than the lock slips in.
$(VENV)/.installed: $(BIN)/python $(INSTALL_INPUTS)
	$(BIN)/pip install --quiet -r $(LOCK)
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

# After changing a dependency in pyproject.toml, or to take newer releases: re-resolve every extra
# into the lock, and argwatch's own dependencies at the same versions into the image's lock
# (tests/unit/test_lock.py fails while they disagree), then run make test.
lock: $(BIN)/python
	$(BIN)/pip install --quiet pip-tools==7.6.2
	$(BIN)/pip-compile --quiet --upgrade --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links \
	  --annotation-style=line --extra tui --extra test --extra lint --extra fuzz --extra k8s --extra bench \
	  --output-file $(LOCK) pyproject.toml
	$(BIN)/pip-compile --quiet --strip-extras --no-emit-index-url --no-emit-find-links --annotation-style=line \
	  --constraint $(LOCK) --output-file requirements/runtime.lock pyproject.toml

run: $(VENV)/.installed
	$(BIN)/python examples/run_demo.py

# The import tree as installed (argwatch.server -> server/, ...), for mypy.
$(VENV)/typecheck/argwatch: $(BIN)/python Makefile
	mkdir -p $@
	ln -sfn $(CURDIR)/proto/argwatch/__init__.py $@/__init__.py
	ln -sfn $(CURDIR)/proto/argwatch/v1 $@/v1
	ln -sfn $(CURDIR)/server $@/server
	ln -sfn $(CURDIR)/tui $@/tui
	ln -sfn $(CURDIR)/client $@/client
	ln -sfn $(CURDIR)/sources $@/sources
	ln -sfn $(CURDIR)/common $@/common
	touch $@

# System packages the tests use as real parts, installed with apt when missing (CI and
# developers run as root): redis-server (started by the tests on a free loopback port) and
# promtool (Debian's prometheus package) for the alert rules, kubectl (Debian's
# kubernetes-client) to render the kustomize manifests, Node.js and npm (nodejs, npm) for the
# TypeScript client test.
APT_DEPS := redis-server:redis-server promtool:prometheus kubectl:kubernetes-client node:nodejs npm:npm

system-deps:
	@missing=""; for pair in $(APT_DEPS); do \
	  command -v $${pair%%:*} >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing with apt-get"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; } \
	  || { echo "missing$$missing and apt-get failed: install them (Debian: apt-get install$$missing)"; exit 1; }; \
	fi

# The TypeScript client (examples/typescript): its npm packages as locked, then its build
# (types generated from the .proto files, then tsc), redone when any of them changes.
TS := examples/typescript
$(TS)/node_modules/.installed: $(TS)/package.json $(TS)/package-lock.json
	cd $(TS) && npm ci --no-audit --no-fund
	touch $@

$(TS)/dist/check.js: $(TS)/node_modules/.installed $(TS)/tsconfig.json $(wildcard $(TS)/src/*.ts) $(wildcard proto/argwatch/v1/*.proto)
	cd $(TS) && npm run build

ts-client: system-deps $(TS)/dist/check.js

test: system-deps $(VENV)/.installed lint typecheck ts-client
	$(BIN)/python -m pytest

check: lint
	$(BIN)/python -m pytest -q tests/unit

# h2load (Debian's nghttp2-client) drives gRPC natively for bench/h2load.py.
bench-deps:
	@command -v h2load >/dev/null 2>&1 || { echo "installing nghttp2-client (h2load) with apt-get"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nghttp2-client >/dev/null; }

bench: system-deps bench-deps $(VENV)/.installed
	$(BIN)/python bench/validate.py
	$(BIN)/python bench/validate.py --gate
	$(BIN)/python bench/h2load.py
	$(BIN)/python bench/stream.py
	$(BIN)/python bench/profile_server.py
	$(BIN)/python bench/gate.py
	$(BIN)/python bench/side_effects.py
	$(BIN)/python bench/growth.py
	$(BIN)/python bench/refresh.py
	$(BIN)/python bench/memory.py
	$(BIN)/python bench/status_tui.py
	$(BIN)/python bench/mode_propagation.py

# After a release: the released contract becomes the current protos (buf breaking compares with it).
proto-release: $(VENV)/.installed
	$(BIN)/buf lint
	$(BIN)/buf build --exclude-source-info -o proto/released/argwatch-v1.json
	$(BIN)/python -c "import json, pathlib; p = pathlib.Path('proto/released/argwatch-v1.json'); \
	  p.write_text(json.dumps(json.loads(p.read_text()), indent=1, sort_keys=True) + '\n')"

# The soak test for 10 minutes instead of make test's 20 s (it prints RSS at the start and end).
soak: $(VENV)/.installed
	SOAK_SECONDS=600 $(BIN)/python -m pytest -q -s tests/soak

# Game days: a fleet on loopback (two replicas, Redis, the demo owner), faults under load, a table of
# what held (bench/gameday.py). make test runs the short form (tests/e2e/test_gameday.py).
gameday: system-deps $(VENV)/.installed
	$(BIN)/python bench/gameday.py

# A longer fuzz run of the request path than make test's 15 s (crash inputs land in .fuzz/).
fuzz: $(VENV)/.installed
	mkdir -p .fuzz/corpus && cp -n tests/fuzz/corpus/* .fuzz/corpus/
	cd .fuzz && ../$(BIN)/python ../tests/fuzz/fuzz_validate.py -max_total_time=300 -print_final_stats=1 corpus

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed $(VENV)/typecheck/argwatch
	$(BIN)/mypy

# The documentation site (docs/, mkdocs.yml) into .site/; --strict fails on a broken link or anchor.
docs: $(VENV)/.installed
	$(BIN)/mkdocs build --strict --site-dir .site

clean:
	rm -rf $(VENV) build *.egg-info proto/argwatch/v1/*_pb2*.py proto/argwatch/v1/*_pb2*.pyi \
	  $(TS)/node_modules $(TS)/dist $(TS)/src/generated .site
