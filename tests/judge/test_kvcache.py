"""The probe report's in-place key/value cache answers exactly as transformers' own
cache does, on the real SmolLM2, and writes into the buffers it made for the prompt."""

from __future__ import annotations

import pytest
import torch

from dlm.judge.kvcache import PreallocatedCache


@pytest.fixture(scope="module")
def smollm2(smollm2_ref):
    from dlm.models import load_model

    return load_model(smollm2_ref).eval()


def _batch(tokenizer, prompts):
    encoded = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    width = max(len(e) for e in encoded)
    ids = torch.full((len(encoded), width), tokenizer.eos_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, e in enumerate(encoded):  # left padded, as `greedy_replies` batches
        ids[row, width - len(e) :] = torch.tensor(e)
        mask[row, width - len(e) :] = 1
    return ids, mask


def _generate(model, ids, mask, new_tokens, cache=None):
    extra = {} if cache is None else {"past_key_values": cache}
    with torch.inference_mode():
        return model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=new_tokens,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            pad_token_id=0,
            **extra,
        )


def test_in_place_cache_gives_the_default_caches_tokens(smollm2, smollm2_tokenizer) -> None:
    prompts = [
        "Where does the json package keep its decoder?",
        "Name one module of the Python standard library that parses e-mail messages, and say why.",
        "Hi",
    ]
    ids, mask = _batch(smollm2_tokenizer, prompts)
    want = _generate(smollm2, ids, mask, 24)
    cache = PreallocatedCache(ids.shape[1] + 24)
    got = _generate(smollm2, ids, mask, 24, cache)
    assert torch.equal(got, want)
    layer = cache.layers[0]
    keys, values = layer._buffers
    assert keys.shape[-2] == ids.shape[1] + 24  # sized once, for the prompt and the answer
    assert layer.keys.untyped_storage().data_ptr() == keys.untyped_storage().data_ptr()
    assert layer.values.untyped_storage().data_ptr() == values.untyped_storage().data_ptr()
    assert layer.get_seq_length() == got.shape[1] - 1  # the last token is generated, not cached


def test_a_cache_too_small_grows_and_still_answers_alike(smollm2, smollm2_tokenizer) -> None:
    ids, mask = _batch(smollm2_tokenizer, ["Which module implements pathlib.Path?"])
    want = _generate(smollm2, ids, mask, 12)
    cache = PreallocatedCache(4)  # fewer positions than the prompt alone
    assert torch.equal(_generate(smollm2, ids, mask, 12, cache), want)
    assert cache.layers[0]._buffers[0].shape[-2] >= ids.shape[1]
