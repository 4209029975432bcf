# clefgate — the two commands a newcomer needs are `make demo` and `make test`.
# Both (re)use a virtualenv at .venv; a stamp file re-installs when pyproject.toml changes.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: demo test serve check model bench lint typecheck system-deps clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# serving dependencies only (no torch): what `make demo` needs
$(VENV)/.stamp-serve: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e .
	touch $@

# everything: serving + training + tests + benchmarks
$(VENV)/.stamp-all: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e '.[train,test,bench]'
	touch $@ $(VENV)/.stamp-serve

system-deps:
	.ci/system-deps

demo: $(VENV)/.stamp-serve
	$(VENV)/bin/clefgate demo

test: $(VENV)/.stamp-all system-deps
	$(VENV)/bin/ruff check gateway models loadtest tests
	$(VENV)/bin/python -m pytest -q $(PYTEST_ARGS)

lint: $(VENV)/.stamp-all
	$(VENV)/bin/ruff check gateway models loadtest tests
	$(VENV)/bin/mypy

model: $(VENV)/.stamp-all
	$(PY) -m models.train --config models/configs/clef-flash.yaml

bench: $(VENV)/.stamp-all system-deps
	$(VENV)/bin/clefgate bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
