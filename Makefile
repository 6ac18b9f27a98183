# docsim: `make run` indexes the shipped sample corpus and prints `docsim info`;
# `make test` runs the test suite. Both create the virtual environment first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
# Setup installs without byte-compiling (below), so Python must be let to write the bytecode of
# what it imports: with PYTHONDONTWRITEBYTECODE set (these machines set it), every process of
# the test run compiled torch and transformers from source again, about 10 s each.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup browser postgres run test test-sqlite test-postgresql test-slow lint docs bench clean audit \
	image image-tools test-image

$(VENV)/.installed: pyproject.toml scripts/install.py
	$(PYTHON) -m venv $(VENV)
	# scripts/install.py installs with uv under pip's configuration (pip where uv fails): the
	# same packages from the same indexes, in about 10 s instead of pip's 40 s here. Neither
	# byte-compiles at install time: Python compiles the modules it imports when it imports
	# them, instead of every module of every package (Ray's and torch's thousands).
	# CPU install path: the local CPU wheel of torch, pinned (an unpinned torch pulls CUDA).
	# setuptools comes first too, so that docsim's own editable build runs in this environment
	# (--no-build-isolation) instead of a fresh one that would need setuptools installed.
	# Then docsim's requirements, and docsim itself last (--no-deps): uv builds the editable
	# while it installs the rest, and setuptools runs every installed package's egg_info hook,
	# so a fresh clone once failed on transformers' `kernels` installed without httpcore2 yet.
	$(BIN)/python scripts/install.py torch==2.13.0 "setuptools>=68"
	$(BIN)/python scripts/install.py --dependencies-of ".[cpu,dev]"
	$(BIN)/python scripts/install.py --no-build-isolation --no-deps -e ".[cpu,dev]"
	touch $@

setup: $(VENV)/.installed

# The page tests drive Debian's chromium through Selenium; install it when it is missing.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  $(SUDO) apt-get install -y --no-install-recommends chromium chromium-driver || \
	  ($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends chromium chromium-driver)

# The PostgreSQL run of the suite starts its own throwaway server from Debian's binaries.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || \
	  ($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends postgresql)

run: setup
	$(BIN)/docsim index
	$(BIN)/docsim info
	$(BIN)/docsim serve

# The suite on SQLite (the embedded default), then again on a real PostgreSQL for every test that
# can reach SQL (tests marked no_sql are left out there: see tests/conftest.py). Test files run
# in parallel, one worker per core (pytest-xdist); a file's tests stay in one worker. Each
# worker, and every process it starts, computes on one thread (OMP_NUM_THREADS: torch, FAISS,
# OpenVINO): two workers of two threads each on two cores wait on each other's spinning
# threads, and the SQLite pass took 8:44 that way against 5:47 on one thread each.
# `make lint` runs beside the SQLite pass (make -j2): the pass keeps the cores about 70% busy,
# and mypy's 40 s on a fresh clone fit in the rest. Either failing fails `make test`.
# For the same reason builds split documents in their own process (DOCSIM_INDEX__SPLIT_WORKERS=1):
# split workers would each import the CLI again, beside two busy test workers. Their
# tests (tests/indexer/builder/test_split_*.py) ask for workers explicitly.
PARALLEL := -n auto --dist loadfile --no-loadscope-reorder --durations=10
test: setup browser postgres
	@$(MAKE) --no-print-directory -j2 lint test-sqlite
	@$(MAKE) --no-print-directory test-postgresql

test-sqlite: setup browser
	DOCSIM_REQUIRE_BROWSER=1 OMP_NUM_THREADS=1 DOCSIM_INDEX__SPLIT_WORKERS=1 $(BIN)/pytest --db sqlite $(PARALLEL)

test-postgresql: setup browser postgres
	DOCSIM_REQUIRE_BROWSER=1 OMP_NUM_THREADS=1 DOCSIM_INDEX__SPLIT_WORKERS=1 $(BIN)/pytest --db postgresql $(PARALLEL)

# Style and types: ruff, and mypy (strict on `models` and `search`; see pyproject.toml).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

# The container image, built without a Docker engine (there is none here): buildah builds the
# Dockerfile from a Debian base that debootstrap makes, with this machine's pip configuration
# as build arguments (scripts/image.py). Both need root. `make test-image` builds it and runs
# every command of the compose files from it (tests/test_image.py; part of `make test-slow`).
image-tools:
	@command -v buildah >/dev/null && command -v debootstrap >/dev/null || \
	  $(SUDO) apt-get install -y --no-install-recommends buildah debootstrap || \
	  ($(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends buildah debootstrap)

image: setup image-tools
	$(BIN)/python scripts/image.py build --tag docsim:latest

test-image: SHELL := /bin/bash
test-image: setup image-tools postgres
	mkdir -p build
	DOCSIM_IMAGE_REPORT=build/test-image.json $(BIN)/pytest -m image tests/test_image.py \
	  -p no:randomly -v 2>&1 | tee build/test-image.log; exit $${PIPESTATUS[0]}

# The sharded service's slow tests run in a process of their own: one slow run crashed without
# a report (exit 1) after several Ray sessions had started and stopped in one process.
SHARDED_SLOW = tests/app/test_sharded_aila_slow.py tests/app/test_sharded_service.py \
	tests/app/test_cluster_slow.py
# The last run is the PostgreSQL run of the `heavy_sql` tests, which `make test` runs on SQLite.
test-slow: setup postgres image-tools
	$(BIN)/pytest -m slow $(addprefix --ignore=,$(SHARDED_SLOW))
	$(BIN)/pytest -m slow $(SHARDED_SLOW)
	OMP_NUM_THREADS=1 DOCSIM_INDEX__SPLIT_WORKERS=1 $(BIN)/pytest --db postgresql -m heavy_sql $(PARALLEL)

# The documentation site into site/ (tests/test_docs.py builds it too, with --strict).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# make bench: list the benchmarks; make bench NAME=query_latency ARGS="--data-dir DIR": run one
bench: setup
	$(BIN)/python -m benchmarks $(NAME) $(ARGS)

clean:
	rm -rf $(VENV) docsim-data site

# Known vulnerabilities of the installed dependencies (pip-audit asks PyPI's JSON API; it
# needs the network, so it is not part of `make test`).
audit: setup
	$(BIN)/pip install --quiet pip-audit
	$(BIN)/pip-audit --skip-editable --progress-spinner off
