# conduit-mcp developer tasks. Works from a fresh clone with only python3 (and node/npm for
# the interop peers) installed; everything else comes from the package registries.

PYTHON ?= python3
VENV := .venv
LEGACY_VENV := .venv-legacy
PEERS_NODE := .peers/node
EVERYTHING_VERSION := 2026.8.31
LEGACY_MCP_VERSION := 1.30.0
PIP_FLAGS := --disable-pip-version-check --no-input -q

BIN := $(VENV)/bin
# Two stamps: the demo needs only the runtime dependencies; lint and tests need the
# developer tools too (the `dev` dependency group of pyproject.toml).
RUNTIME_STAMP := $(VENV)/.stamp-runtime
DEV_STAMP := $(VENV)/.stamp-dev
# `pip install --group` (PEP 735 dependency groups) needs pip 25.1 or newer.
PIP_STAMP := $(VENV)/.stamp-pip-25.1
LEGACY_STAMP := $(LEGACY_VENV)/.stamp-mcp-$(LEGACY_MCP_VERSION)
EVERYTHING_STAMP := $(PEERS_NODE)/.stamp-everything-$(EVERYTHING_VERSION)

.PHONY: help venv peers demo test lint bench soak clean distclean

help:
	@echo "make demo   - run the demo against the embedded test server"
	@echo "make test   - lint + the whole test suite (interop peers included)"
	@echo "make bench  - benchmarks against the official mcp client"
	@echo "make soak   - 20 clients through random server kills for 10 minutes (SOAK_ARGS=...)"
	@echo "make lint   - ruff format --check, ruff check, mypy (strict, the package)"
	@echo "make venv   - create $(VENV): conduit-mcp (editable) + the dev dependency group"
	@echo "make peers  - create $(LEGACY_VENV) (mcp==$(LEGACY_MCP_VERSION)) and $(PEERS_NODE) (server-everything)"

venv: $(DEV_STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(PIP_STAMP): | $(BIN)/python
	$(BIN)/python -m pip install $(PIP_FLAGS) 'pip>=25.1'
	touch $@

# Re-install only when the project metadata changes.
$(RUNTIME_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install $(PIP_FLAGS) -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(PIP_STAMP)
	$(BIN)/python -m pip install $(PIP_FLAGS) -e . --group dev
	touch $@ $(RUNTIME_STAMP)

peers: $(LEGACY_STAMP) $(EVERYTHING_STAMP)

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

demo: $(RUNTIME_STAMP)
	$(BIN)/python -m conduit_mcp demo

lint: $(DEV_STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

test: $(DEV_STAMP) peers
	$(MAKE) --no-print-directory lint
	$(BIN)/pytest

bench: venv
	$(BIN)/python benchmarks/bench_stdio.py
	$(BIN)/python benchmarks/bench_http.py
	$(BIN)/python benchmarks/bench_cache.py

# Not in `make test`: it runs for minutes. E.g. SOAK_ARGS="--minutes 2 --clients 20".
SOAK_ARGS ?=
soak: venv
	$(BIN)/python scripts/soak.py $(SOAK_ARGS)

clean:
	rm -rf .pytest_cache .ruff_cache .hypothesis build *.egg-info
	find . -name __pycache__ -type d -not -path './.venv*' -not -path './.peers/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(LEGACY_VENV) .peers
