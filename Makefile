# odradek: the two commands the README names (`make serve`, `make test`) plus bench and lint.
#   make serve [ARGS="--config server.properties --override num.partitions=3"]
#   make test          installs test dependencies, then runs the whole suite (slow tests included)
PYTHON ?= python3
ARGS ?=

.PHONY: install serve test bench bench-quick lint

install:
	@$(PYTHON) -c "import odradek.cli.main, mypyc" 2>/dev/null || $(PYTHON) -m pip install -e '.[native]'
	@$(PYTHON) tools/build_native.py

serve: install
	$(PYTHON) -m odradek serve $(ARGS)

test:
	PYTHON=$(PYTHON) tools/install-deps.sh
	$(PYTHON) -m pytest -q

bench: install
	$(PYTHON) -m pip install -q -e '.[bench]'
	$(PYTHON) bench/throughput.py

bench-quick: install
	$(PYTHON) -m pip install -q -e '.[bench]'
	$(PYTHON) bench/throughput.py --quick

lint:
	ruff check .
	ruff format --check .
