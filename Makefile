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
VENV_STAMP := $(VENV)/.stamp-installed
LEGACY_STAMP := $(LEGACY_VENV)/.stamp-mcp-$(LEGACY_MCP_VERSION)
EVERYTHING_STAMP := $(PEERS_NODE)/.stamp-everything-$(EVERYTHING_VERSION)

.PHONY: help venv peers demo test lint bench clean distclean

help:
	@echo "make demo   - run the demo against the embedded test server"
	@echo "make test   - lint + the whole test suite (interop peers included)"
	@echo "make bench  - benchmarks against the official mcp client"
	@echo "make lint   - ruff check"
	@echo "make venv   - create $(VENV) with conduit-mcp[test] (editable)"
	@echo "make peers  - create $(LEGACY_VENV) (mcp==$(LEGACY_MCP_VERSION)) and $(PEERS_NODE) (server-everything)"

venv: $(VENV_STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-install only when the project metadata changes.
$(VENV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install $(PIP_FLAGS) -e '.[test]'
	touch $@

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

demo: venv
	$(BIN)/python -m conduit_mcp demo

lint: venv
	$(BIN)/ruff check .

test: venv peers
	$(BIN)/ruff check .
	$(BIN)/pytest

bench: venv
	$(BIN)/python benchmarks/bench_stdio.py
	$(BIN)/python benchmarks/bench_http.py
	$(BIN)/python benchmarks/bench_cache.py

clean:
	rm -rf .pytest_cache .ruff_cache .hypothesis build *.egg-info
	find . -name __pycache__ -type d -not -path './.venv*' -not -path './.peers/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(LEGACY_VENV) .peers
