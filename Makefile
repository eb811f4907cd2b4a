# One-word entry points. `make demo` and `make test` each create ./.venv on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.PHONY: demo test bench lint clean

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

bench: $(VENV)/.bench-installed
	$(PY) -m benchmarks

lint: $(VENV)/.installed
	$(PY) -m ruff check recallql tests benchmarks examples

clean:
	rm -rf $(VENV) .pytest_cache
