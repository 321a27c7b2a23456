# odradek: the two commands the README names (`make serve`, `make test`) plus bench and lint.
#   make serve [ARGS="--config server.properties --override num.partitions=3"]   (installs first if needed)
#   make test          installs test dependencies, then runs the whole suite (slow tests included) on two workers
#   make lint          ruff, the import layers and import cycles (CI runs it before the tests)
PYTHON ?= python3
ARGS ?=

.PHONY: install serve test bench bench-quick lint

# Quiet when everything is there; one line, then pip's errors only, when it installs.
install:
	@$(PYTHON) -c "import odradek.cli.serve, mypyc, aiohttp, jinja2" 2>/dev/null || { \
	    echo "make: installing odradek with its native extra: pip install -q -e '.[native]'"; \
	    PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 $(PYTHON) -m pip install -q -e '.[native]'; }
	@$(PYTHON) tools/build_native.py

serve: install
	$(PYTHON) -m odradek serve $(ARGS)

# two workers (pytest-xdist), each taking a whole test file at a time: a file's module fixtures (its
# broker, its cluster) are started once, and the files with slow or Spark tests go first in the order
# tests/conftest.py gives (--no-loadscope-reorder: xdist would otherwise order files by their number
# of tests, which puts the one-test cluster and Spark files last, side by side)
test:
	PYTHON=$(PYTHON) tools/install-deps.sh
	$(PYTHON) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

bench: install
	$(PYTHON) -m pip install -q -e '.[bench]'
	$(PYTHON) bench/throughput.py

bench-quick: install
	$(PYTHON) -m pip install -q -e '.[bench]'
	$(PYTHON) bench/throughput.py --quick

# ruff, then the layers (import-linter's contracts in pyproject.toml) and no import cycle between modules
lint:
	@$(PYTHON) -c "import importlinter, ruff" 2>/dev/null || \
	    PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 $(PYTHON) -m pip install -q -e '.[lint]'
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	lint-imports
	$(PYTHON) tools/import_cycles.py
