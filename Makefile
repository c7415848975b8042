# Set-up and checks. Everything runs inside .venv, created on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_DEMO := $(VENV)/.installed-demo
STAMP_TEST := $(VENV)/.installed-test

.PHONY: demo test lint typecheck kernels unit docs dist eval bench golden clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_DEMO): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[cli,fuzzy,toml]"
	touch $@

$(STAMP_TEST): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[test]"
	$(BIN)/python tools/get_chromium.py --optional $(VENV)/chromium
	touch $@ $(STAMP_DEMO)

demo: $(STAMP_DEMO)
	$(BIN)/loopwatch scan examples/

lint: $(STAMP_TEST)
	$(BIN)/ruff check src tests benchmarks tools hatch_build.py
	$(BIN)/ruff format --check src tests benchmarks tools hatch_build.py

typecheck: $(STAMP_TEST)
	$(BIN)/mypy

# the optional compiled parts, built next to the source: the text kernels (a compiler warning is an error here) and the
# per-event path compiled by mypyc (loopwatch._native.MODULES)
kernels: $(STAMP_TEST)
	$(BIN)/python hatch_build.py --strict
	$(BIN)/python hatch_build.py --core

# the whole suite with the compiled kernels and core (a test fails if they are not in use), then the rules' tests
# again from their source, with the kernels' pure-Python twins
unit: kernels
	LOOPWATCH_REQUIRE_COMPILED=1 $(BIN)/pytest
	LOOPWATCH_PURE_PYTHON=1 $(BIN)/pytest tests/test_kernels.py tests/test_detectors.py tests/test_fingerprint.py tests/test_events.py \
		tests/test_feature_pass.py

docs: $(STAMP_TEST)
	$(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site

test: lint typecheck docs unit

# a wheel and an sdist in dist/ (built in an isolated environment by the standard build front end)
dist: $(BIN)/python
	$(BIN)/python -m pip install --quiet build
	$(BIN)/python -m build --outdir dist .

CORPUS ?= ../shared/corpus

# the shared corpus next to the repository and the runs added in corpus/, each with its dev labels
eval: $(STAMP_DEMO)
	$(BIN)/loopwatch eval $(CORPUS)/*.jsonl.gz corpus/*.jsonl.gz \
		--labels $(CORPUS)/labels/dev.jsonl --labels corpus/labels/dev.jsonl \
		--compare default-lexical jaccard-turns call-cycles ralph doom-loop behavioral

# default-lexical's verdicts on the corpus and the benchmark traffic, against benchmarks/results/golden-*.json.gz
golden: $(STAMP_DEMO)
	$(BIN)/python benchmarks/golden.py check --preset default-lexical $(CORPUS)/*.jsonl.gz corpus/*.jsonl.gz

bench: $(STAMP_TEST)
	$(BIN)/python benchmarks/bench_guard.py
	$(BIN)/python benchmarks/bench_scan.py
	$(BIN)/python benchmarks/bench_store.py

clean:
	rm -rf $(VENV) build dist site .mypy_cache .pytest_cache .ruff_cache src/loopwatch/core/_kernels_c.*.so
