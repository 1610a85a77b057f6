"""`dlm.train.attention`: attention in float32 under the CPU's bfloat16 autocast, and
transformers' own function everywhere else."""

import pytest
import torch
from tinyllama import tiny_llama

from dlm.train.attention import NAME, use_dlm_attention


def _model():
    torch.manual_seed(0)
    model = tiny_llama(
        64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
    )
    model.config._attn_implementation = "sdpa"
    return model.eval()


def _attention_inputs():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 16, 8, generator=g).to(torch.bfloat16) for _ in range(3))
    return q, k, v


def test_attention_runs_in_float32_only_under_cpu_bf16_autocast():
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    model, other = _model(), _model()
    use_dlm_attention(model)
    use_dlm_attention(model)  # idempotent
    wrapped = ALL_ATTENTION_FUNCTIONS[NAME]
    # only this model changed: transformers' own sdpa stays registered, and other models use it
    assert ALL_ATTENTION_FUNCTIONS["sdpa"] is sdpa_attention_forward
    assert model.config._attn_implementation == NAME and other.config._attn_implementation == "sdpa"
    module = model.model.layers[0].self_attn
    q, k, v = _attention_inputs()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = wrapped(module, q, k, v, None, is_causal=True)
    expected, _ = sdpa_attention_forward(module, q.float(), k.float(), v.float(), None, is_causal=True)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, expected.to(torch.bfloat16))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        in_bf16, _ = sdpa_attention_forward(module, q, k, v, None, is_causal=True)
    assert not torch.equal(out, in_bf16)  # the bfloat16 kernel rounds otherwise: the wrapper did something
    # without autocast (float32 training, the goldens, inference) the call is transformers' own
    q32, k32, v32 = q.float(), k.float(), v.float()
    plain, _ = wrapped(module, q32, k32, v32, None, is_causal=True)
    assert torch.equal(plain, sdpa_attention_forward(module, q32, k32, v32, None, is_causal=True)[0])


def test_a_float32_forward_is_unchanged_and_a_bf16_one_goes_through_the_wrapper(monkeypatch):
    from dlm.train import attention

    model = _model()
    ids = torch.tensor([[1, 5, 9, 13, 2, 7, 3, 11]])
    before = model(input_ids=ids).logits
    use_dlm_attention(model)
    assert torch.equal(model(input_ids=ids).logits, before)
    seen = []
    grouped = attention._cpu_grouped

    def spy(module, query, *args, **kwargs):
        seen.append(query.dtype)
        return grouped(module, query, *args, **kwargs)

    monkeypatch.setattr(attention, "_cpu_grouped", spy)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(input_ids=ids).logits
    assert torch.isfinite(logits).all()
    assert seen == [torch.float32, torch.float32]  # both layers' attention, in float32 under bf16 autocast


def test_sequences_of_float32_below_tokens_and_more_keep_bfloat16_attention(monkeypatch):
    # at 512 tokens and more torch's bfloat16 kernel is as fast or faster (module docstring)
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from dlm.train import attention

    monkeypatch.setattr(attention, "FLOAT32_BELOW", 16)  # the inputs' 16 tokens are "long"
    monkeypatch.setattr(attention, "bfloat16_attention_kernels", lambda: True)  # AVX512 kernels
    module = _model().model.layers[0].self_attn
    q, k, v = _attention_inputs()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = attention._sdpa(module, q, k, v, None, is_causal=True)
        own, _ = sdpa_attention_forward(module, q, k, v, None, is_causal=True)
    assert torch.equal(out, own)
    monkeypatch.setattr(attention, "FLOAT32_BELOW", 17)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        short, _ = attention._sdpa(module, q, k, v, None, is_causal=True)
    assert not torch.equal(short, own)  # 16 < 17: the float32 wrapper ran


def _masked_inputs(dtype):
    """Query [2, 4, 16, 8] over key/value [2, 2, 16, 8] (two query heads a key/value
    head) and a causal bool mask [2, 1, 16, 16] split into two packed examples of 8."""
    g = torch.Generator().manual_seed(2)
    q = torch.randn(2, 4, 16, 8, generator=g, dtype=dtype, requires_grad=True)
    k, v = (torch.randn(2, 2, 16, 8, generator=g, dtype=dtype, requires_grad=True) for _ in range(2))
    mask = torch.ones(16, 16, dtype=torch.bool).tril().expand(2, 1, 16, 16).clone()
    mask[:, :, 8:, :8] = False
    return q, k, v, mask


def test_grouped_heads_attend_as_transformers_repeated_ones_do():
    # the output and the query's gradient are the same bits; the key's and value's
    # gradients sum the group's heads in another order (module docstring)
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from dlm.train import attention

    module = _model().model.layers[0].self_attn
    assert module.num_key_value_groups == 2
    got, want = [], []
    for run, out in ((attention._cpu_grouped, got), (sdpa_attention_forward, want)):
        q, k, v, mask = _masked_inputs(torch.float32)
        o, _ = run(module, q, k, v, mask, dropout=0.0, scaling=module.scaling)
        o.square().sum().backward()
        out.extend([o.detach(), q.grad, k.grad, v.grad])
    assert got[0].shape == (2, 16, 4, 8) and got[0].is_contiguous()
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert torch.allclose(got[2], want[2], atol=1e-5) and torch.allclose(got[3], want[3], atol=1e-5)
    q, k, v, _ = _masked_inputs(torch.float32)  # no mask: causal, as transformers decides
    causal, _ = attention._cpu_grouped(module, q, k, v, None, scaling=module.scaling)
    assert torch.equal(causal, sdpa_attention_forward(module, q, k, v, None, scaling=module.scaling)[0])


def test_decode_steps_and_caches_keep_transformers_path(monkeypatch):
    from transformers.integrations import sdpa_attention

    from dlm.train import attention

    calls = []
    monkeypatch.setattr(attention, "_cpu_grouped", lambda *a, **k: calls.append("grouped"))
    original = sdpa_attention.sdpa_attention_forward
    monkeypatch.setattr(
        sdpa_attention, "sdpa_attention_forward", lambda *a, **k: calls.append("transformers") or original(*a, **k)
    )
    module = _model().model.layers[0].self_attn
    q, k, v, mask = _masked_inputs(torch.float32)
    with torch.no_grad():
        attention._sdpa(module, q[:, :, -1:], k, v, mask[:, :, -1:])  # one query token: a decode step
        attention._sdpa(module, q, k, v, mask, position_bias=torch.zeros(1, 4, 16, 16))
        attention._sdpa(module, q, k, v, mask)
    assert calls == ["transformers", "transformers", "grouped"]


def test_under_the_avx2_pin_long_sequences_attend_in_float32_too(monkeypatch):
    # torch's bfloat16 CPU attention needs AVX512 kernels: under the AVX2 pin a long
    # sequence in bfloat16 would stop the run, so it attends in float32 like a short one
    from dlm.train import attention

    monkeypatch.setattr(attention, "FLOAT32_BELOW", 16)  # the inputs' 16 tokens are "long"
    monkeypatch.setattr(attention, "bfloat16_attention_kernels", lambda: False)
    module = _model().model.layers[0].self_attn
    q, k, v = _attention_inputs()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = attention._sdpa(module, q, k, v, None, is_causal=True)
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    expected, _ = sdpa_attention_forward(module, q.float(), k.float(), v.float(), None, is_causal=True)
    assert torch.equal(out, expected.to(torch.bfloat16))


def test_a_bf16_forward_of_512_tokens_runs_under_the_pin():
    from dlm.train import attention

    if attention.bfloat16_attention_kernels():
        pytest.skip("torch runs AVX512 kernels here (the pin is off)")
    torch.manual_seed(0)
    model = tiny_llama(64, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)
    model.config._attn_implementation = "sdpa"
    use_dlm_attention(model)
    ids = torch.arange(1, 513).remainder(60).add(1)[None]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(input_ids=ids, use_cache=False).logits
    assert logits.shape[1] == 512 and torch.isfinite(logits).all()
