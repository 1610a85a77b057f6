"""The fused LM-head loss equals the model's own cross-entropy, with its gradients, and
never asks the LM head for more than one position (a tiny randomly initialized Llama)."""

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from tinyllama import tiny_hyper, tiny_llama, train_tiny

from dlm.train.lm_loss import SCORING_CHUNK_TOKENS, causal_lm_token_nll, fusable, head_is_frozen, token_nll


def problem(n: int = 300, h: int = 32, v: int = 1000) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(n, h, generator=gen, requires_grad=True)
    weight = torch.randn(v, h, generator=gen) * 0.1
    target = torch.randint(0, v, (n,), generator=gen)
    target[::7] = -100
    upstream = torch.randn(n, generator=gen)
    return hidden, weight, target, upstream


def reference(hidden, weight, target, upstream, autocast: bool):
    hidden.grad = None
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        nll = F.cross_entropy(F.linear(hidden, weight).float(), target, ignore_index=-100, reduction="none")
    (nll * upstream).sum().backward()
    return nll.detach(), hidden.grad.clone()


def fused(hidden, weight, target, upstream, autocast: bool, chunk: int):
    hidden.grad = None
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        nll = token_nll(hidden, weight, target, chunk=chunk)
    (nll * upstream).sum().backward()
    return nll.detach(), hidden.grad.clone()


@pytest.mark.parametrize("chunk", [64, 300, 4096])
def test_float32_nll_and_gradient_equal_cross_entropy(chunk: int) -> None:
    hidden, weight, target, upstream = problem()
    want_nll, want_grad = reference(hidden, weight, target, upstream, autocast=False)
    got_nll, got_grad = fused(hidden, weight, target, upstream, autocast=False, chunk=chunk)
    assert torch.allclose(got_nll, want_nll, atol=1e-5, rtol=1e-5)
    assert torch.all(got_nll[::7] == 0)  # -100 carries no loss
    assert torch.allclose(got_grad, want_grad, atol=1e-5, rtol=1e-5)
    assert torch.all(got_grad[::7] == 0)


def test_bfloat16_autocast_matches_cross_entropy_under_autocast() -> None:
    hidden, weight, target, upstream = problem()
    want_nll, want_grad = reference(hidden, weight, target, upstream, autocast=True)
    got_nll, got_grad = fused(hidden, weight, target, upstream, autocast=True, chunk=64)
    assert got_nll.dtype == torch.float32
    assert torch.allclose(got_nll, want_nll, atol=1e-5)  # the same bf16 products, float32 after
    # the gradient's product is rounded to bfloat16 in a different order: about 1% of its scale
    assert (got_grad - want_grad).abs().max() <= 0.01 * want_grad.abs().max()


def _widest_logits(hidden, weight, target) -> int:
    """The most rows of logits `token_nll` allocated at once, at its default chunk."""
    from torch.utils._python_dispatch import TorchDispatchMode

    widest = [0]

    class Allocations(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor) and out.dim() == 2 and out.shape[1] == weight.shape[0]:
                widest[0] = max(widest[0], out.shape[0])
            return out

    with Allocations():
        token_nll(hidden, weight, target)
    return widest[0]


def test_scoring_holds_fewer_logit_rows_than_training() -> None:
    # without a gradient nothing feeds backward, so float32 scoring takes the bounded chunk:
    # two [1024, V] float32 buffers were 403 MB for SmolLM2's vocabulary
    hidden, weight, target, _ = problem(n=2048)
    target[::7] = 5  # every row carries loss
    assert _widest_logits(hidden, weight, target) == 1024  # training: CHUNK_TOKENS
    with torch.no_grad():
        assert _widest_logits(hidden, weight, target) == SCORING_CHUNK_TOKENS[torch.float32] == 64
    assert _widest_logits(hidden.detach(), weight, target) == 64  # nothing to differentiate
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert _widest_logits(hidden, weight, target) == 64


def test_scoring_chunks_give_the_training_chunks_numbers() -> None:
    hidden, weight, target, _ = problem(n=2048)
    trained = token_nll(hidden, weight, target).detach()
    with torch.no_grad():
        scored = token_nll(hidden, weight, target)
    assert torch.allclose(scored, trained, atol=1e-6, rtol=1e-6)


def test_scoring_a_float32_head_under_autocast_casts_it_a_slice_at_a_time(monkeypatch) -> None:
    from torch.utils._python_dispatch import TorchDispatchMode

    import dlm.train.lm_loss as lm_loss

    monkeypatch.setattr(lm_loss, "VOCAB_SLICE", 256)  # 1000 ids: four slices, the last short
    hidden, weight, target, _ = problem(n=500)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        whole = token_nll(hidden, weight, target).detach()  # with a gradient: the whole head cast
    cast_rows: list[int] = []

    class Casts(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            bf16 = isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16 and not out._is_view()
            if bf16 and out.dim() == 2 and out.shape[1] == 32:
                cast_rows.append(out.shape[0])
            return out

    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16), Casts():
        sliced = token_nll(hidden, weight, target)
    assert max(cast_rows) <= 500  # the rows' own cast, and weight slices of at most 256 ids
    assert 1000 not in cast_rows
    assert torch.all(sliced[::7] == 0)
    torch.testing.assert_close(sliced, whole, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("autocast", [False, True])
def test_chunk_sizes_that_cut_the_rows_alike_change_no_bit(autocast: bool) -> None:
    # CHUNK_TOKENS is a memory setting. Chunk sizes that cut the loss rows into pieces of
    # the same sizes give the same bits on any CPU: 257 loss rows make three pieces of 86
    # or 85 under each of these. Across piece sizes the bits held on the 2-core Zen 4 but
    # not on a 16-core AVX2 host, whose float32 products of 52 or 257 rows differed from
    # those of 86 rows in the last bits (docs/determinism.md)
    hidden, weight, target, upstream = problem()
    assert int((target != -100).sum()) == 257
    nll_a, grad_a = fused(hidden, weight, target, upstream, autocast=autocast, chunk=128)
    for chunk in (86, 100, 120):
        nll_b, grad_b = fused(hidden, weight, target, upstream, autocast=autocast, chunk=chunk)
        assert torch.equal(nll_a, nll_b) and torch.equal(grad_a, grad_b), chunk


def test_without_grad_nothing_is_kept_for_backward() -> None:
    hidden, weight, target, _ = problem()
    with torch.no_grad():
        nll = token_nll(hidden, weight, target, chunk=64)
    assert nll.grad_fn is None and nll.shape == (300,)


def batch(packed: bool) -> dict[str, torch.Tensor]:
    ids = torch.tensor([[5, 9, 13, 17, 21, 25], [2, 6, 10, 14, 0, 0]])
    labels = torch.tensor([[5, 9, 13, 17, 21, 25], [-100, -100, 10, 14, -100, -100]])
    if packed:  # two examples in row 0, restarting positions; no attention mask
        return {
            "input_ids": ids,
            "labels": labels,
            "position_ids": torch.tensor([[0, 1, 2, 0, 1, 2], [0, 1, 2, 3, 0, 1]]),
        }
    return {"input_ids": ids, "labels": labels, "attention_mask": (labels != -100) | (ids != 0)}


@pytest.mark.parametrize("packed", [False, True])
def test_the_models_own_loss_and_gradients_come_out_of_the_fused_path(packed: bool) -> None:
    model = tiny_llama().train()
    model.config.use_cache = False
    model.get_output_embeddings().weight.requires_grad_(False)
    inputs = batch(packed)
    own = model(**inputs).loss
    own.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)

    widths: list[int] = []
    hook = model.get_output_embeddings().register_forward_hook(lambda m, a, out: widths.append(out.shape[1]))
    nll = causal_lm_token_nll(model, inputs)
    hook.remove()
    loss = nll.sum() / (inputs["labels"][:, 1:] != -100).sum()
    loss.backward()
    assert widths == []  # the LM head never ran: no [B, T, V] logits
    assert nll.shape == inputs["input_ids"].shape
    assert torch.allclose(loss, own, atol=1e-6)
    got = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert got.keys() == want.keys() and want
    assert all(torch.allclose(got[n], want[n], atol=1e-6) for n in want)


def test_under_autocast_no_copy_of_the_lm_head_is_kept_for_backward() -> None:
    # the model's own head, run for the one position it keeps, would cast its [V, H]
    # weight to bfloat16 and save that copy for backward, for logits nobody reads
    model = tiny_llama().train()
    model.config.use_cache = False
    model.get_output_embeddings().weight.requires_grad_(False)
    vocab_by_hidden = tuple(model.get_output_embeddings().weight.shape)
    saved: list[tuple[tuple[int, ...], torch.dtype]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append((tuple(t.shape), t.dtype))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            nll = causal_lm_token_nll(model, batch(packed=True))
    head_copies = {(vocab_by_hidden, torch.bfloat16), (vocab_by_hidden[::-1], torch.bfloat16)}  # or its .T
    assert saved and not head_copies & set(saved)
    assert nll.dtype == torch.float32 and nll.requires_grad
    assert type(model.get_output_embeddings()).forward is model.get_output_embeddings().forward.__func__


def test_fusable_only_where_the_logits_are_the_frozen_heads_product_alone() -> None:
    model = tiny_llama()
    assert not head_is_frozen(model) and not fusable(model)  # the head trains: its own loss
    model.get_output_embeddings().weight.requires_grad_(False)
    assert head_is_frozen(model) and fusable(model)
    model.config.model_type = "gemma2"  # soft-caps its logits: not a plain product
    assert not fusable(model)
    model.config.model_type = "llama"
    model.lm_head = torch.nn.Linear(16, 64, bias=True).requires_grad_(False)
    assert not fusable(model)


def test_a_model_the_fused_loss_does_not_fit_is_scored_from_its_own_logits() -> None:
    model = tiny_llama().train()  # its LM head trains, so `fusable` is False
    inputs = batch(packed=False)
    own = model(**inputs).loss
    own.backward()
    want = model.get_output_embeddings().weight.grad.clone()
    model.zero_grad(set_to_none=True)
    nll = causal_lm_token_nll(model, inputs)
    (nll.sum() / (inputs["labels"][:, 1:] != -100).sum()).backward()
    assert torch.allclose(nll.sum() / (inputs["labels"][:, 1:] != -100).sum(), own.detach(), atol=1e-6)
    assert torch.allclose(model.get_output_embeddings().weight.grad, want, atol=1e-6)  # the head learns too


def word_tokenizer(vocab: int = 64):
    """A fast tokenizer over `vocab` made-up words, what the Trainer needs as `processing_class`."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {f"w{i}": i for i in range(vocab)}
    inner = Tokenizer(models.WordLevel(words, unk_token="w1"))
    inner.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=inner, pad_token="w0", eos_token="w2", unk_token="w1")


def test_the_loop_trains_and_logs_each_steps_mean_token_nll() -> None:
    gen = torch.Generator().manual_seed(3)
    ids = [torch.randint(3, 64, (12,), generator=gen).tolist() for _ in range(4)]
    losses: list[float] = []
    sink = SimpleNamespace(on_train_start=lambda total: None, on_step=lambda step, loss, *rest: losses.append(loss))
    result = train_tiny(ids, sink=sink)
    assert result.steps == 2 and len(losses) == 2
    # every token of the 4 examples was trained once (2 steps of 2), each carrying loss but the first
    assert (
        result.tokens_seen == 48 and result.loss_tokens == 44 and result.processed_tokens == 48
    )  # never padded past sequence_len
    assert result.train_loss == pytest.approx(sum(losses) / 2)
    assert all(3.0 < loss < 5.0 for loss in losses)  # about log(64) for a fresh tiny model
    lora_b = [p for n, p in result.model.named_parameters() if "lora_B" in n]
    assert lora_b and any(bool(p.detach().abs().sum() > 0) for p in lora_b)  # it trained


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("autocast", [False, True])
def test_on_cuda_the_fused_nll_and_gradient_equal_cross_entropy(autocast: bool) -> None:
    hidden, weight, target, upstream = (t.cuda() for t in problem())
    hidden = hidden.detach().requires_grad_(True)
    hidden.grad = None
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        want = F.cross_entropy(F.linear(hidden, weight).float(), target, ignore_index=-100, reduction="none")
    (want * upstream).sum().backward()
    want_grad = hidden.grad.clone()
    hidden.grad = None
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        got = token_nll(hidden, weight, target, chunk=64)
    (got * upstream).sum().backward()
    assert torch.allclose(got, want.detach(), atol=1e-4)
    tolerance = 0.01 * want_grad.abs().max() if autocast else 1e-4
    assert (hidden.grad - want_grad).abs().max() <= tolerance


def test_rows_without_loss_never_reach_the_head() -> None:
    # a prompt token's NLL and gradient are 0 without its logits: with a head that would
    # poison any product it enters, the masked rows still read exactly 0
    hidden, weight, target, upstream = problem()
    target[:] = -100
    target[5] = 3
    weight = weight.clone()
    weight[7] = float("nan")  # every row's logits would hold a NaN
    nll, grad = fused(hidden, weight, target, upstream, autocast=False, chunk=64)
    masked = torch.ones(300, dtype=torch.bool)
    masked[5] = False
    assert torch.all(nll[masked] == 0) and torch.all(grad[masked] == 0)
    assert torch.isnan(nll[5])


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_in_the_loop_the_lm_head_runs_in_the_runs_precision(monkeypatch, precision: str) -> None:
    # the fused head must run under the run's autocast, or a bf16 run pays float32 for it
    import dlm.train.lm_loss as lm_loss

    dtypes: list[torch.dtype] = []
    real = lm_loss.token_nll

    def spy(hidden, weight, target, chunk=None, rows=None):
        device = hidden.device.type  # the loop trains on a GPU where there is one
        on = torch.is_autocast_enabled(device)
        dtypes.append(torch.get_autocast_dtype(device) if on else hidden.dtype)
        return real(hidden, weight, target, chunk, rows)

    monkeypatch.setattr(lm_loss, "token_nll", spy)
    gen = torch.Generator().manual_seed(5)
    ids = [torch.randint(3, 64, (12,), generator=gen).tolist() for _ in range(4)]
    train_tiny(ids, hyper=tiny_hyper(precision=precision))
    assert dtypes == [getattr(torch, precision)] * 2


def test_the_fused_path_never_calls_the_lm_head() -> None:
    # the decoder runs alone: a forward installed on the head (accelerate's hooks) stays put, unrun
    model = tiny_llama().train()
    model.config.use_cache = False
    head = model.get_output_embeddings()
    head.weight.requires_grad_(False)
    calls: list[int] = []

    def hooked(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return type(head).forward(head, x)

    head.forward = hooked
    causal_lm_token_nll(model, batch(packed=True))
    assert head.__dict__["forward"] is hooked and not calls  # restored, and not run meanwhile
