"""A weight copied out of a mapped file gives its pages back, only where nothing was
written to the mapping, and reads the same afterwards (Linux)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from dlm.train.mapped import FileMappings

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")


def resident_kb(address: int) -> tuple[int, int]:
    """(Rss, Anonymous) in kB of the mapping holding `address`."""
    inside, rss = False, 0
    with open("/proc/self/smaps") as fh:
        for line in fh:
            head = line.split()
            if head and "-" in head[0] and ":" not in head[0]:
                low, high = (int(x, 16) for x in head[0].split("-"))
                inside = low <= address < high
            elif inside and head[0] == "Rss:":
                rss = int(head[1])
            elif inside and head[0] == "Anonymous:":
                return rss, int(head[1])
    raise AssertionError("no mapping holds the address")


@pytest.fixture()
def mapped(tmp_path):
    values = np.arange(4 * 1024 * 1024, dtype=np.float32)  # 16 MiB
    path = tmp_path / "weights.bin"
    values.tofile(path)
    # a private, writable mapping: how safetensors maps a model for transformers
    array = np.memmap(path, dtype=np.float32, mode="c")
    return values, array, torch.from_numpy(array)


def test_a_clean_mappings_pages_go_and_come_back_with_the_same_values(mapped) -> None:
    values, _array, tensor = mapped
    assert float(tensor.sum()) > 0  # every page read
    before, _ = resident_kb(tensor.data_ptr())
    assert before >= 15 * 1024
    dropped = FileMappings.read_clean().drop(tensor)
    assert dropped >= 15 * 1024 * 1024
    after, _ = resident_kb(tensor.data_ptr())
    assert after <= before - 15 * 1024
    assert np.array_equal(tensor.numpy(), values)  # faulted back in from the file


def test_a_mapping_written_to_keeps_its_pages(mapped) -> None:
    _values, array, tensor = mapped
    array[5] = -1.0  # one private copy-on-write page: dropping would lose the write
    assert resident_kb(tensor.data_ptr())[1] > 0
    assert FileMappings.read_clean().drop(tensor) == 0
    assert float(tensor[5]) == -1.0


def test_anonymous_memory_is_never_dropped() -> None:
    tensor = torch.randn(4 * 1024 * 1024)
    copy = tensor.clone()
    assert FileMappings.read_clean().drop(tensor) == 0
    assert torch.equal(tensor, copy)


def test_only_whole_pages_inside_the_tensor_go(mapped) -> None:
    values, _array, tensor = mapped
    float(tensor.sum())
    part = tensor[1000 : 1000 + 3000]  # 12,000 bytes from byte 4,000: one whole 4 KiB page
    assert FileMappings.read_clean().drop(part) in (0, 4096, 8192)
    assert np.array_equal(tensor.numpy(), values)


def test_holding_the_embedding_in_bfloat16_gives_its_float32_pages_back(smollm2_ref) -> None:
    from dlm.models import load_model
    from dlm.train.precision import hold_frozen_embeddings

    model = load_model(smollm2_ref)
    layer = model.model.layers[0].mlp.down_proj.weight  # stays float32, keeps the mapping alive
    table = model.get_input_embeddings().weight
    float(table.sum()), float(layer.sum())
    if resident_kb(layer.data_ptr())[1] != 0:
        pytest.skip("the loader wrote into its mapping")
    before, _ = resident_kb(layer.data_ptr())
    converted = hold_frozen_embeddings(model, "bfloat16")
    after, _ = resident_kb(layer.data_ptr())
    assert converted == 49152 * 576 * 4
    assert before - after >= 0.95 * converted / 1024  # the table's 113 MB left the mapping
    assert table.dtype == torch.bfloat16
