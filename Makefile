# fuel — two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_BASE := $(VENV)/.installed-base
STAMP_TEST := $(VENV)/.installed-test
STAMP_BENCH := $(VENV)/.installed-bench

.PHONY: demo test lit pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP_BASE): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[torch]'
	touch $@

$(STAMP_TEST): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@ $(STAMP_BASE)

$(STAMP_BENCH): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,bench]'
	touch $@ $(STAMP_BASE) $(STAMP_TEST)

demo: $(STAMP_BASE)
	$(BIN)/python examples/demo.py

test: $(STAMP_TEST)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/lit -sv tests/filecheck
	$(BIN)/python -m pytest -q -m "not gpu" tests

bench: $(STAMP_BENCH)
	$(BIN)/python bench/dispatch_overhead.py
	$(BIN)/python bench/executor_overhead.py
	$(BIN)/python bench/peers.py

clean:
	rm -rf $(VENV) build *.egg-info
