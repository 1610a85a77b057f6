---
dlm_id: 01JDSTD1B0000000000000000A
dlm_version: 1
base_model: smollm2-135m
system_prompt: You are an expert on the Python standard library. Answer briefly and name the module or file.
training:
  learning_rate: 0.003
  # 4 examples per optimizer step in micro-batches of 2: the steps peak near 1.35 GB
  # instead of 1.6 (`batch_size: 4` alone, about 10% faster a step: docs/determinism.md)
  batch_size: 2
  gradient_accumulation_steps: 2
  sequence_len: 128
  seed: 42
  # no max_steps: the default recipe gives each Q/A pair about 12 sightings within the
  # budget (tokens processed), next to a sample of the ~71K source windows
  budget: 20k
  # the budget goes to the pairs and the source windows; the prose says how this document
  # trains, not facts to ask, and synth pairs would be drawn too seldom to stick
  synth:
    enabled: false
  eval:
    fraction: 0.02
    max_rows: 64
  sources:
    - path: $DLM_STDLIB
      include: ["**/*.py"]
      exclude: ["site-packages/", "__pycache__/", "dist-packages/"]
      max_bytes_per_file: 200000
---

# The Python standard library

This document teaches the model the layout of the Python standard library of the
interpreter that runs `dlm`. Every `.py` file under the library folder becomes one
training row that starts with the file's path, so the model learns where code lives.

::instruction::

### Q
Where does the json package keep its decoder?

### A
In `json/decoder.py`: it defines `JSONDecoder` and the scanner helpers that `json.loads` uses.

### Keys
- json/decoder.py

### Q
Which module implements `pathlib.Path`?

### A
`pathlib.py` (a package `pathlib/` in newer Pythons): `Path` subclasses `PurePath` and adds file-system calls.

### Keys
- pathlib

### Q
Where is `collections.OrderedDict` defined?

### A
In `collections/__init__.py`, with a C implementation in `_collections` used when available.

### Keys
- collections/__init__.py

### Q
Which file implements `functools.lru_cache`?

### A
`functools.py`: `lru_cache` wraps the function with `_lru_cache_wrapper`, in C when `_functools` provides it.

### Keys
- functools.py

### Q
What does `shutil.copytree` use to copy each file?

### A
It calls `copy2` by default (the `copy_function` argument), which copies data and metadata.

### Keys
- copy2

### Q
Where is the `argparse.ArgumentParser` class?

### A
In `argparse.py`, a single module that also defines `Action`, `Namespace` and the help formatters.

### Keys
- argparse.py

::probe::

### Q
In which file is the JSON decoder of the standard library?

### A
`json/decoder.py`.

### Keys
- json/decoder.py

### Q
Which file holds the code of `functools.lru_cache`?

### A
`functools.py`.

### Keys
- functools.py

### Q
What function does `shutil.copytree` call to copy a file?

### A
`copy2`.

### Keys
- copy2

### Q
Which source file defines `argparse.ArgumentParser`?

### A
`argparse.py`.

### Keys
- argparse.py
