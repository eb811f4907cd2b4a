# One-word entry points. `make demo` and `make test` each create ./.venv on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: demo test test-fast bench lint deadcode clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

$(VENV)/.bench-installed: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/recallql demo

test: $(VENV)/.installed
	$(PY) -m pytest -q

# The inner loop: everything but the tests marked `slow` (real models, corpora, crash trials).
test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -m "not slow"

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
