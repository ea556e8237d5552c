# Every target sets up what it needs: on a fresh machine `make run` and `make test` are enough.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP_INSTALL := $(BIN)/python -m pip install --quiet
# Two installs: the service alone (`make run`, `make migrate`), and the service with the test
# and lint tools (everything else). The second includes the first, so it stamps both.
SERVICE_STAMP := $(VENV)/.installed-service
DEV_STAMP := $(VENV)/.installed-dev
BENCH_STAMP := $(VENV)/.installed-bench
PYTEST_WORKERS ?= 2

.PHONY: install bytecode browser run migrate test typecheck container-test soak lint openapi openapi-check bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip

$(SERVICE_STAMP): pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e '.[dev]'
	touch $@ $(SERVICE_STAMP)

install: $(DEV_STAMP) bytecode

# app/'s bytecode, compiled ahead as pip compiles an installed package's. Where
# PYTHONDONTWRITEBYTECODE is set (it is on this project's machines) Python never writes it, and
# every process of the editable install compiled every module of app/ from source: 14% of the
# instructions of `import app.client`, 10% of `import app.main` (README, "the Python client").
# Only changed files are compiled again; a stale file is never used (Python checks it against
# the source).
bytecode: | $(BIN)/python
	$(BIN)/python -m compileall -q app

# The benchmark's peers and redaction candidates (the `bench` extra) on top of the dev install.
$(BENCH_STAMP): pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e '.[dev,bench]'
	touch $@ $(DEV_STAMP) $(SERVICE_STAMP)

migrate: $(SERVICE_STAMP) bytecode
	$(BIN)/alembic upgrade head

# SQLite at ./data/context-store.db, 127.0.0.1:8000, auth off (loopback only); the banner
# says where, what and how before the JSON logs begin.
run: $(SERVICE_STAMP) bytecode
	$(BIN)/alembic upgrade head
	CONTEXT_STORE_AUTH=$${CONTEXT_STORE_AUTH:-off} $(BIN)/context-store serve --banner

# The /docs browser test drives Debian's chromium headless (never a browser downloaded at run
# time). Installed here when missing and root; otherwise the test says how, and skips (fails
# under CI=true).
browser:
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || { \
		echo "installing chromium for the /docs browser test"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
		>/dev/null 2>&1 || echo "could not install chromium: the browser test will say so"; }

# mypy --strict over app/ (configured in pyproject.toml); `make test` runs it before the suite.
typecheck: install
	$(BIN)/mypy app

test: install browser typecheck
	$(BIN)/ruff check app migrations tests
	$(BIN)/pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

# Build docker/Dockerfile with podman, run it against this machine's PostgreSQL and smoke-test
# it; validate docker-compose.yml; hadolint. Installs podman & co. when missing (needs root).
container-test: install
	bash .ci/container-test

# The reliability tests' long variants: CONTEXT_STORE_SOAK times the fuzzing examples, the
# property examples, the crash test's load and the concurrent rounds.
SOAK ?= 10
SOAK_TESTS := tests/platform/test_fuzz.py tests/platform/test_crash_safety.py \
	tests/platform/test_concurrency.py tests/platform/test_stalled_downloads.py \
	tests/platform/test_archive_import_load.py \
	tests/saves/test_redaction_properties.py tests/saves/test_redaction.py

soak: install
	CONTEXT_STORE_SOAK=$(SOAK) $(BIN)/pytest -n $(PYTEST_WORKERS) $(SOAK_TESTS) $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check app migrations tests
	$(BIN)/ruff format --check app migrations tests

openapi: install
	$(BIN)/python -m app.openapi write

openapi-check: install
	$(BIN)/python -m app.openapi check

# Not part of `make test`: the benchmark suite, every figure a ratio to a ceiling measured in the
# same run (see README, "Performance"). Needs PostgreSQL at 127.0.0.1:5432 (user postgres, trust)
# for its PostgreSQL half; installs wrk from Debian's packages when it can (root), and uses its
# own httpx driver otherwise. BENCH_ARGS="--parts appends --backends sqlite" narrows a run.
bench: $(BENCH_STAMP) bytecode
	@command -v wrk >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || { apt-get install -y -qq wrk \
		|| { apt-get update -qq && apt-get install -y -qq wrk; }; } >/dev/null 2>&1 || true
	$(BIN)/python -m tests.bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) data .pytest_cache
