# The two commands: `make run` (gateway + demo owning service + traffic, with the TUI on it)
# and `make test` (the whole suite). Both set up everything they need first.
# `make check` is the quick loop: lint and the unit tests not marked slow, in under 20 s.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Every dependency and tool at the exact version CI ran (pip-compile's output; `make lock` refreshes it).
LOCK := requirements/test.lock
# Reinstall when anything that shapes the installed package changes.
INSTALL_INPUTS := pyproject.toml setup.py $(LOCK) $(wildcard proto/argwatch/v1/*.proto) $(wildcard server/*/*.c server/native/*.h)

.PHONY: run test check bench lint typecheck clean system-deps bench-deps proto-release ts-client go-client java-client fuzz soak gameday docs lock

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
	  --extra openai-agents --extra langgraph --extra pydantic-ai --extra mcp --extra otel \
	  --output-file $(LOCK) pyproject.toml
	$(BIN)/pip-compile --quiet --strip-extras --no-emit-index-url --no-emit-find-links --annotation-style=line \
	  --constraint $(LOCK) --output-file requirements/runtime.lock pyproject.toml

run: $(VENV)/.installed
	$(BIN)/python examples/run_demo.py

# The import tree as installed (argwatch.server -> server/, ...), for mypy and the docs' API reference (griffe).
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
# developers run as root): redis-server and redis-sentinel (started by the tests on free loopback ports) and
# promtool (Debian's prometheus package) for the alert rules, kubectl (Debian's
# kubernetes-client) to render the kustomize manifests, Node.js and npm (nodejs, npm) for the
# TypeScript client test, and Debian's Go and Java gRPC stacks for the Go and Java clients
# (below). Each entry is what shows that a package is there, then the package: a command on
# PATH, or for a library package (no command) a file that it installs.
APT_DEPS := redis-server:redis-server redis-sentinel:redis-sentinel promtool:prometheus kubectl:kubernetes-client node:nodejs npm:npm

# protoc 3.21, with the well-known types (struct.proto, timestamp.proto), for both clients.
APT_DEPS += protoc:protobuf-compiler /usr/include/google/protobuf/struct.proto:libprotobuf-dev
# Go: Go 1.19, protoc-gen-go and protoc-gen-go-grpc, and the libraries' sources for GOPATH mode.
# golang-google-grpc-dev (1.33) takes golang/protobuf 1.3 or 1.5 and apt picks 1.3, whose
# marshaller panics on protoc-gen-go 1.28's messages: 1.5 (registry.go is new in it) is named.
GOCODE := /usr/share/gocode/src
APT_DEPS += go:golang-go protoc-gen-go:protoc-gen-go protoc-gen-go-grpc:protoc-gen-go-grpc \
  $(GOCODE)/google.golang.org/grpc/version.go:golang-google-grpc-dev \
  $(GOCODE)/google.golang.org/protobuf/proto/proto.go:golang-google-protobuf-dev \
  $(GOCODE)/github.com/golang/protobuf/proto/registry.go:golang-github-golang-protobuf-1-5-dev
# Java: a JDK, grpc-java's protoc plugin, and the jars that examples/java/build.sh names.
# libgrpc-java declares none of netty, gson or perfmark, though grpc-netty and grpc-core load
# them, and the plugin's @javax.annotation.Generated needs geronimo-annotation to compile.
JARS := /usr/share/java
APT_DEPS += javac:default-jdk-headless grpc_java_plugin:protobuf-compiler-grpc-java-plugin \
  $(JARS)/grpc-netty.jar:libgrpc-java $(JARS)/protobuf.jar:libprotobuf-java $(JARS)/guava.jar:libguava-java \
  $(JARS)/gson.jar:libgoogle-gson-java $(JARS)/perfmark-api.jar:libperfmark-java \
  $(JARS)/netty-codec-http2.jar:libnetty-java \
  $(JARS)/geronimo-annotation-1.3-spec.jar:libgeronimo-annotation-1.3-spec-java

system-deps:
	@missing=""; for pair in $(APT_DEPS); do want=$${pair%%:*}; \
	  case $$want in /*) test -e $$want ;; *) command -v $$want >/dev/null 2>&1 ;; esac \
	  || missing="$$missing $${pair#*:}"; done; \
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

# Every source but the generated types (src/generated, made by the build itself).
TS_SRC := $(filter-out $(TS)/src/generated/%,$(wildcard $(TS)/src/*.ts $(TS)/src/*/*.ts))
$(TS)/dist/check.js $(TS)/dist/gates-check.js &: $(TS)/node_modules/.installed $(TS)/tsconfig.json $(TS_SRC) $(wildcard proto/argwatch/v1/*.proto)
	cd $(TS) && npm run build

ts-client: system-deps $(TS)/dist/check.js $(TS)/dist/gates-check.js

# The Go and Java clients (examples/go, examples/java): each build.sh generates the stubs with
# protoc from the .proto files and builds offline on Debian's packages (docs/calling.md shows
# its commands); redone when a .proto file or a source changes.
GO_CLIENT := examples/go
JAVA_CLIENT := examples/java
$(GO_CLIENT)/build/check: $(GO_CLIENT)/build.sh $(GO_CLIENT)/main.go $(wildcard proto/argwatch/v1/*.proto)
	$(GO_CLIENT)/build.sh

$(JAVA_CLIENT)/build/check.jar: $(JAVA_CLIENT)/build.sh $(JAVA_CLIENT)/Check.java $(wildcard proto/argwatch/v1/*.proto)
	$(JAVA_CLIENT)/build.sh

go-client: system-deps $(GO_CLIENT)/build/check

java-client: system-deps $(JAVA_CLIENT)/build/check.jar

test: system-deps $(VENV)/.installed lint typecheck ts-client go-client java-client
	$(BIN)/python -m pytest

check: lint
	$(BIN)/python -m pytest -q -m "not slow" tests/unit

# h2load (Debian's nghttp2-client) drives gRPC natively for bench/h2load.py; valgrind counts the
# server's instructions for bench/server_instructions.py.
bench-deps:
	@command -v h2load >/dev/null 2>&1 || { echo "installing nghttp2-client (h2load) with apt-get"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nghttp2-client >/dev/null; }
	@command -v valgrind >/dev/null 2>&1 || { echo "installing valgrind with apt-get"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind >/dev/null; }

# Each bench prints its own figures as it runs; those with a goal in issue 31 also report them
# (bench/figures.py) to FIGURES, and the run ends with one table of them against their goals
# (bench/table.py), written to bench/results/table.md too (docs/performance.md carries the latest).
# A bench that fails does not stop the others: its exit status is written beside the figures, the
# table shows it, and make bench fails at the end.
FIGURES := bench/results/figures.jsonl
bench_run = $(BIN)/python bench/$(1); printf '{"ran": "%s", "exit": %d}\n' '$(1)' $$? >> $(FIGURES)

bench: export ARGWATCH_BENCH_FIGURES := $(CURDIR)/$(FIGURES)
bench: system-deps bench-deps $(VENV)/.installed
	mkdir -p bench/results
	$(BIN)/python bench/table.py --begin $(FIGURES)
	$(call bench_run,validate.py)
	$(call bench_run,validate.py --gate)
	$(call bench_run,h2load.py)
	$(call bench_run,stream.py)
	$(call bench_run,server_instructions.py)
	$(call bench_run,tracing.py)
	$(call bench_run,profile_server.py)
	$(call bench_run,gate.py)
	$(call bench_run,decision_log.py)
	$(call bench_run,arrays.py)
	$(call bench_run,side_effects.py)
	$(call bench_run,shadow.py)
	$(call bench_run,growth.py)
	$(call bench_run,replay.py)
	$(call bench_run,refresh.py)
	$(call bench_run,churn.py)
	$(call bench_run,retired_history.py)
	$(call bench_run,catalogue.py)
	$(call bench_run,memory.py)
	$(call bench_run,scoped_memory.py)
	$(call bench_run,status_tui.py)
	$(call bench_run,mode_propagation.py)
	$(call bench_run,metrics_flood.py)
	$(BIN)/python bench/table.py $(FIGURES) --out bench/results/table.md

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

# A longer fuzz run of the request path than make test's 8 s (crash inputs land in .fuzz/).
fuzz: $(VENV)/.installed
	mkdir -p .fuzz/corpus && cp -n tests/fuzz/corpus/* .fuzz/corpus/
	cd .fuzz && ../$(BIN)/python ../tests/fuzz/fuzz_validate.py -max_total_time=300 -print_final_stats=1 corpus

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed $(VENV)/typecheck/argwatch
	$(BIN)/mypy

# The documentation site (docs/, mkdocs.yml) into .site/; --strict fails on a broken link or anchor.
docs: $(VENV)/.installed $(VENV)/typecheck/argwatch
	$(BIN)/mkdocs build --strict --site-dir .site

clean:
	rm -rf $(VENV) build *.egg-info proto/argwatch/v1/*_pb2*.py proto/argwatch/v1/*_pb2*.pyi \
	  $(TS)/node_modules $(TS)/dist $(TS)/src/generated .site $(GO_CLIENT)/build $(JAVA_CLIENT)/build
