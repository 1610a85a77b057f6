"""What a LoRA forward keeps for backward: one bfloat16 copy of an input that several
LoRA A matrices read (`dlm.train.shared_cast`) and no `silu(gate)` in the gated MLP
(`dlm.train.swiglu`), each with the same gradients to the bit."""

import pytest
import torch
from peft import LoraConfig, get_peft_model
from tinyllama import tiny_llama
from torch.utils._python_dispatch import TorchDispatchMode

from dlm.train.attention import use_dlm_attention
from dlm.train.lm_loss import causal_lm_token_nll
from dlm.train.precision import hold_frozen_weights
from dlm.train.shared_cast import share_lora_input_casts
from dlm.train.swiglu import is_silu_mlp, recompute_silu_products, silu_mul

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


IDS = torch.arange(3, 27).view(2, 12)


def _model(precision: str, *, share: bool = False, silu: bool = False, dropout: float = 0.0):
    """A 2-layer tiny LoRA Llama with LoRA on every linear, its frozen weights held for
    `precision`, with the shared casts and the recomputed SiLU when asked."""
    model = get_peft_model(
        tiny_llama(tie_word_embeddings=True, num_hidden_layers=2, num_key_value_heads=1),
        LoraConfig(r=4, lora_alpha=8, lora_dropout=dropout, target_modules=TARGETS, init_lora_weights=False),
    )
    hold_frozen_weights(model, precision)
    if share:
        assert share_lora_input_casts(model) == 2 * 2 * len(TARGETS)  # A and base, 2 layers
    if silu:
        assert recompute_silu_products(model) == 2
    return model


def _step(precision: str, *, share: bool = False, silu: bool = False, dropout: float = 0.0):
    """One forward and backward of `_model`: (token NLL, LoRA gradients, bytes of the
    distinct storages the forward saved for backward)."""
    model = _model(precision, share=share, silu=silu, dropout=dropout)
    saved: dict[int, int] = {}

    def pack(t):
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    torch.manual_seed(1)  # the dropout masks, when there are any
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
            nll = causal_lm_token_nll(model, {"input_ids": IDS, "labels": IDS})
    nll.sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
    return nll.detach(), grads, sum(saved.values())


def _same(a, b) -> bool:
    return torch.equal(a[0], b[0]) and a[1].keys() == b[1].keys() and all(torch.equal(a[1][n], b[1][n]) for n in a[1])


def test_shared_input_casts_keep_one_copy_and_the_same_gradients():
    plain, shared = _step("bfloat16"), _step("bfloat16", share=True)
    assert _same(plain, shared)
    # q/k/v read one input and gate/up another: 3 + 2 copies a layer become 2
    assert shared[2] < plain[2]


def test_shared_casts_leave_float32_and_dropout_runs_alone():
    assert _step("float32", share=True)[2] == _step("float32")[2]
    with_masks = _step("bfloat16", dropout=0.1)
    assert _same(with_masks, _step("bfloat16", share=True, dropout=0.1))  # each A reads its own masked input


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_the_gated_mlp_recomputes_silu_with_the_same_gradients(precision):
    plain, recomputed = _step(precision), _step(precision, silu=True)
    assert _same(plain, recomputed)
    assert recomputed[2] < plain[2]


def test_silu_mul_matches_autograd_alone_and_spots_only_silu_mlps():
    g = torch.Generator().manual_seed(0)
    gate, up = (torch.randn(5, 7, generator=g, requires_grad=True) for _ in range(2))
    w = torch.randn(5, 7, generator=g)
    (silu_mul(gate, up) * w).sum().backward()
    ours = gate.grad.clone(), up.grad.clone()
    gate.grad = up.grad = None
    (torch.nn.functional.silu(gate) * up * w).sum().backward()
    assert torch.equal(ours[0], gate.grad) and torch.equal(ours[1], up.grad)
    model = tiny_llama(hidden_act="gelu")
    assert not any(is_silu_mlp(m) for m in model.modules())
    assert recompute_silu_products(model) == 0


def test_shared_casts_serve_the_base_linears_and_skip_the_down_proj_round_trip():
    """Casts of activations in one bf16 forward of a 2-layer tiny Llama, with attention in
    float32 as `dlm train` runs it (`use_dlm_attention`). Each layer,
    without the hooks: autocast's own bfloat16 copy for each base linear and A matrix
    reading a float32 input (q, k, v, o, gate, up: 12), and peft's float32 round trip for
    down_proj's bfloat16 one (2). With them: one copy each of the attention's input, the
    attention output and the MLP's input. Outside the layers: the embedding's lookups and
    the rotary positions, 2 either way."""

    class Casts(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.of_activations = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            # a cast of a [batch, tokens, width] activation, not of a weight
            if func is torch.ops.aten._to_copy.default and args[0].dim() == 3:
                self.of_activations += 1
            return out

    counts = []
    for share in (False, True):
        model = _model("bfloat16", share=share)
        use_dlm_attention(model)
        with Casts() as casts, torch.autocast("cpu", dtype=torch.bfloat16):
            causal_lm_token_nll(model, {"input_ids": IDS, "labels": IDS})
        counts.append(casts.of_activations)
    assert counts == [2 + 2 * (12 + 2), 2 + 2 * 3]
