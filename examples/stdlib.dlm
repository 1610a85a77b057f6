---
dlm_id: 01JDSTD1B0000000000000000A
dlm_version: 1
base_model: smollm2-135m
system_prompt: You are an expert on the Python standard library. Answer briefly and name the module or file.
training:
  lora_r: 8
  lora_alpha: 16
  learning_rate: 0.001
  batch_size: 4
  sequence_len: 128
  max_steps: 20
  seed: 42
  # the six Q/A pairs below make up half of the examples drawn; without this, 20 steps
  # over ~71K source windows would rarely see them
  instruction_share: 0.5
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

### Q
Which module implements `pathlib.Path`?

### A
`pathlib.py` (a package `pathlib/` in newer Pythons): `Path` subclasses `PurePath` and adds file-system calls.

### Q
Where is `collections.OrderedDict` defined?

### A
In `collections/__init__.py`, with a C implementation in `_collections` used when available.

### Q
Which file implements `functools.lru_cache`?

### A
`functools.py`: `lru_cache` wraps the function with `_lru_cache_wrapper`, in C when `_functools` provides it.

### Q
What does `shutil.copytree` use to copy each file?

### A
It calls `copy2` by default (the `copy_function` argument), which copies data and metadata.

### Q
Where is the `argparse.ArgumentParser` class?

### A
In `argparse.py`, a single module that also defines `Action`, `Namespace` and the help formatters.
