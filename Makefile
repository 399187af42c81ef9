# fuel — two commands on a fresh machine: `make demo` and `make test`.
#
# Both install from the lock (requirements/*.txt: exact versions and sha256 hashes, checked by pip
# with --require-hashes), so a fresh clone installs what the last `make lock` resolved and tested.
#   make lock          re-resolve the lock after a change to pyproject.toml (keeps existing pins;
#                      `make lock LOCK_ARGS=--upgrade` moves every pin to the newest allowed)
#   make test-latest   the suite against the newest versions pyproject.toml's ranges allow, in its
#                      own venv (.venv-latest): a library release that breaks fuel is found here
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LATEST := .venv-latest
TOOLS := .venv-tools
PIP_TOOLS := pip-tools==7.6.2
LOCK_ARGS ?=
STAMP_BASE := $(VENV)/.installed-base
STAMP_TEST := $(VENV)/.installed-test
PIP_LOCKED := install -q --require-hashes --no-deps
PIP_SELF := install -q --no-deps --no-build-isolation -e .
COMPILE := $(TOOLS)/bin/pip-compile -q --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-index-url --no-emit-find-links $(LOCK_ARGS) pyproject.toml
PYTEST_ARGS := -q -m "not gpu" --durations=15

.PHONY: demo test lint lit pytest bench lock test-latest clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# demo.txt is the torch extra; dev.txt is test + bench + torch (a superset, same pins).
$(STAMP_BASE): requirements/demo.txt pyproject.toml | $(BIN)/python
	$(BIN)/pip $(PIP_LOCKED) -r requirements/demo.txt
	$(BIN)/pip $(PIP_SELF)
	touch $@

$(STAMP_TEST): requirements/dev.txt pyproject.toml | $(BIN)/python
	$(BIN)/pip $(PIP_LOCKED) -r requirements/dev.txt
	$(BIN)/pip $(PIP_SELF)
	touch $@ $(STAMP_BASE)

demo: $(STAMP_BASE)
	$(BIN)/python examples/demo.py

test: lint lit pytest

# the import layers (pyproject.toml [tool.importlinter]): no import reaches up a layer; the
# house format and lint rules (pyproject.toml [tool.ruff])
lint: $(STAMP_TEST)
	$(BIN)/lint-imports
	$(BIN)/ruff format --check --quiet .
	$(BIN)/ruff check --quiet .

lit: $(STAMP_TEST)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/lit -sv tests/filecheck

pytest: $(STAMP_TEST)
	$(BIN)/python -m pytest $(PYTEST_ARGS) tests

bench: $(STAMP_TEST)
	$(BIN)/python bench/dispatch_overhead.py
	$(BIN)/python bench/executor_overhead.py
	$(BIN)/python bench/peers.py
	$(BIN)/python bench/zoo.py

$(TOOLS)/bin/pip-compile:
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install -q $(PIP_TOOLS)

# dev.txt first; demo.txt starts from dev.txt's pins, so the two never disagree on a version.
lock: | $(TOOLS)/bin/pip-compile
	$(COMPILE) --extra test --extra bench --extra torch -o requirements/dev.txt
	cp requirements/dev.txt requirements/demo.txt
	$(COMPILE) --extra torch -o requirements/demo.txt

test-latest:
	rm -rf $(LATEST)
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/pip install -q --upgrade --upgrade-strategy eager -e '.[test,bench]'
	$(LATEST)/bin/pip list --format=freeze | grep -iE '^(xdsl|numpy|ml.dtypes|torch|triton|onnx)'
	cd $(CURDIR) && $(LATEST)/bin/lint-imports
	$(LATEST)/bin/ruff format --check --quiet . && $(LATEST)/bin/ruff check --quiet .
	PATH="$(CURDIR)/$(LATEST)/bin:$$PATH" $(LATEST)/bin/lit -sv tests/filecheck
	$(LATEST)/bin/python -m pytest $(PYTEST_ARGS) tests

clean:
	rm -rf $(VENV) $(LATEST) $(TOOLS) build *.egg-info
