# One-word entry points. `make demo` and `make test` each create ./.venv on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: demo test test-fast test-cluster bench lint deadcode clean

$(VENV)/.created:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	touch $@

# The development install: every extra (mcp, demo, pandas, arrow) and the dev tools.
$(VENV)/.installed: pyproject.toml $(VENV)/.created
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# What the demo needs: recallql and its `demo` extra (the chitchat-dataset conversations).
$(VENV)/.demo-installed: pyproject.toml $(VENV)/.created
	$(PY) -m pip install --quiet -e '.[demo]'
	touch $@

$(VENV)/.bench-installed: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $@

demo: $(VENV)/.demo-installed
	$(VENV)/bin/recallql demo

test: $(VENV)/.installed
	$(PY) -m pytest -q -m "not cluster"

# The Ray cluster tests (marked `cluster`), inside a private network namespace with only
# loopback: Ray's servers listen on every interface even when told 127.0.0.1. Where
# `unshare -n` is not permitted they run outside one and skip, saying why.
UNSHARE := unshare -n sh -c 'ip link set lo up && exec "$$@"' sh
test-cluster: $(VENV)/.installed
	@if unshare -n true 2>/dev/null; then $(UNSHARE) $(PY) -m pytest -q -m cluster; \
	else RECALLQL_NO_UNSHARE=1 $(PY) -m pytest -q -m cluster; fi

# The inner loop: everything but the tests marked `slow` (real models, corpora, crash trials).
test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -m "not slow and not cluster"

bench: $(VENV)/.bench-installed
	$(PY) -m benchmarks

lint: $(VENV)/.installed
	$(PY) -m ruff check recallql tests benchmarks examples
	$(VENV)/bin/lint-imports
	$(PY) -m mypy

# Dead-code candidates (not part of lint: callbacks that typer, lark, pydantic and prompt_toolkit
# call by name show up too; confirm each by hand before removing it).
deadcode: $(VENV)/.installed
	-$(PY) -m vulture recallql tests benchmarks examples --min-confidence 60

clean:
	rm -rf $(VENV) .pytest_cache
