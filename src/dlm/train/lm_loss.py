"""The training loss without the logits: LM head and cross-entropy fused, chunk by chunk.

A causal LM's own loss first makes the logits, `[B, T, V]` with V = 49,152 for
SmolLM2; at the default micro-batch of 4 x 2048 tokens that is 1.6 GB in float32, and
the cross-entropy keeps another such tensor for backward and makes a third for the
gradient (docs/benchmarks.md, "The loss without the logits"). Here the model's decoder runs alone (`get_decoder()`, LoRA layers included)
and hands back the final hidden states `[B, T, H]`; the LM head is never called, and
`token_nll` scores the hidden states `CHUNK_TOKENS` rows at a time. The loss is the last operation of the graph, so each
token's gradient with respect to its hidden state, `(softmax - onehot) @ W` `[H]`, is
computed in the same pass while the chunk's logits exist, and backward only scales it
by the incoming gradient of that token's NLL. What
stays for backward is `[N, H]` floats instead of about three `[N, V]`; no logits are
recomputed. Only the rows whose label carries loss reach the head: a prompt token, the
last position and padding have NLL 0 and gradient 0 without their logits, so the two
LM-head products (a fifth of a SmolLM2-135M step's matmul work) shrink with the share of
tokens that carry loss.

Precision: under autocast the two products run in the autocast dtype (bfloat16), as the
model's own LM head would; the log-sum-exp, the NLL and the softmax are float32, as in
transformers' loss. The LM head weight must be frozen (LoRA never adapts it) and the
model's logits must be that head's product alone (`fusable`); any other model keeps its
own loss.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from dlm.train.data import BASE
from dlm.train.row_blocks import without_blocks

# rows of logits alive at once (SmolLM2: 49,152 float32 logits a row, 197 KB). Fewer rows
# hold less memory but cost float32 time, so float32 takes 1024; under bfloat16 autocast
# small chunks cost little time, and bfloat16 takes 64: its three [64, V] buffers are half
# of 128's at the end of every forward, where a demo step's memory peaks (a demo
# micro-batch has about 500 loss rows). docs/benchmarks.md, "Fused loss: chunk rows", has
# the timings. Chunk sizes that cut the rows into pieces of the same sizes give the same
# bits on any CPU; on some CPUs any chunk size does (tests/test_lm_loss.py)
CHUNK_TOKENS = {torch.float32: 1024, torch.bfloat16: 64}
# scoring (no gradient): two [c, V] float32 buffers and no backward to feed, so the rows
# are bounded for memory: 64 rows hold a sixteenth of 1024's buffers, and the head they
# slow down is a small part of a scoring pass (docs/benchmarks.md, "Fused loss: chunk rows")
SCORING_CHUNK_TOKENS = {torch.float32: 64, torch.bfloat16: 64}
# vocabulary rows of a float32 LM head cast to the autocast dtype at once when scoring:
# the probe report scores its float32 model under bfloat16 autocast, where casting the
# whole head (SmolLM2: 57 MB) for every batch made the general-set pass the report's
# largest after the answers
VOCAB_SLICE = 8192


class _FusedHeadNLL(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        target: torch.Tensor,
        rows: torch.Tensor,
        dtype: torch.dtype,
        chunk: int,
    ) -> torch.Tensor:
        n = hidden.shape[0]
        nll = torch.zeros(n, dtype=torch.float32, device=hidden.device)
        grad = torch.zeros_like(hidden) if ctx.needs_input_grad[0] else None
        # only rows that carry loss reach the head: a masked row's NLL and gradient are 0
        # without it (prompt tokens, the last position, padding)
        with torch.autocast(hidden.device.type, enabled=False):
            if grad is None and weight.dtype != dtype:
                nll[rows] = _nll_over_vocab_slices(hidden[rows], weight, target[rows], dtype, chunk)
                ctx.save_for_backward(hidden.new_zeros(0))
                return nll
            w = weight.to(dtype)
            pieces = _even_chunks(rows, chunk)
            # three [c, V] buffers for every piece of the call: a fresh tensor per piece and
            # per operation can cost a CPU more in page faults than in arithmetic
            width = max((p.shape[0] for p in pieces), default=0)
            logits_buf = hidden.new_empty((width, weight.shape[0]), dtype=torch.float32)
            shifted_buf = torch.empty_like(logits_buf)
            low_buf = None if dtype == torch.float32 else torch.empty_like(logits_buf, dtype=dtype)
            for at in pieces:
                c = at.shape[0]
                logits, shifted = logits_buf[:c], shifted_buf[:c]  # [c, V]
                if low_buf is None:
                    torch.mm(hidden[at].to(dtype), w.T, out=logits)
                else:
                    torch.mm(hidden[at].to(dtype), w.T, out=low_buf[:c])
                    logits.copy_(low_buf[:c])
                # log-sum-exp as torch.logsumexp computes it, without its temporaries
                top = logits.amax(dim=1, keepdim=True)
                torch.sub(logits, top, out=shifted).exp_()
                lse = shifted.sum(dim=1).log_().add_(top.squeeze(1))
                picked = logits.gather(1, target[at, None]).squeeze(1)
                nll[at] = lse - picked
                if grad is not None:
                    probs = logits.sub_(lse[:, None]).exp_()  # softmax, in place of the logits
                    probs[torch.arange(c, device=probs.device), target[at]] -= 1.0
                    if low_buf is None:
                        grad[at] = probs @ w
                    else:
                        grad[at] = (low_buf[:c].copy_(probs) @ w).to(grad.dtype)
        ctx.save_for_backward(grad if grad is not None else hidden.new_zeros(0))
        return nll

    @staticmethod
    def backward(ctx: Any, grad_nll: torch.Tensor) -> tuple[Any, ...]:
        (grad,) = ctx.saved_tensors
        return grad * grad_nll[:, None].to(grad.dtype), None, None, None, None, None


def _nll_over_vocab_slices(
    hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, dtype: torch.dtype, chunk: int
) -> torch.Tensor:
    """Scoring's NLL when the LM head must be cast to `dtype`: each `VOCAB_SLICE` rows of
    `weight` [V, H] are cast once and scored against every row of `hidden` [n, H] (in
    `chunk`-row pieces), the log-sum-exp kept running over the slices. The products are
    the same `dtype` products as casting the whole head; the sums are float32 in another
    order. Returns float32 [n] (nats); every `target` [n] must be a vocabulary id."""
    n = hidden.shape[0]
    low = hidden.to(dtype)
    top = torch.full((n,), float("-inf"), dtype=torch.float32, device=hidden.device)
    total = torch.zeros(n, dtype=torch.float32, device=hidden.device)
    picked = torch.zeros(n, dtype=torch.float32, device=hidden.device)
    spans = [slice(int(p[0]), int(p[-1]) + 1) for p in _even_chunks(torch.arange(n), chunk)]
    for start in range(0, weight.shape[0], VOCAB_SLICE):
        w = weight[start : start + VOCAB_SLICE].to(dtype)  # one cast of this slice for every row
        local = target - start
        inside = (local >= 0) & (local < w.shape[0])
        for at in spans:
            logits = torch.mm(low[at], w.T).float()  # [c, slice]
            peak = torch.maximum(top[at], logits.amax(dim=1))
            total[at] = total[at] * torch.exp(top[at] - peak) + torch.exp(logits - peak[:, None]).sum(dim=1)
            top[at] = peak
            hit = logits.gather(1, local[at].clamp(0, w.shape[0] - 1)[:, None]).squeeze(1)
            picked[at] += torch.where(inside[at], hit, torch.zeros_like(hit))
    return total.log() + top - picked


def _even_chunks(rows: torch.Tensor, chunk: int) -> list[torch.Tensor]:
    """`rows` cut into the fewest pieces of at most `chunk`, of sizes that differ by at most
    one. A CPU matmul can take another kernel for a product of a few rows, which rounds
    differently from the same rows in a larger product, so no piece is a short tail: a
    row gets the same bits in any chunk size."""
    n = rows.shape[0]
    if n == 0:
        return []
    pieces = -(-n // chunk)
    return list(torch.tensor_split(rows, pieces))


def loss_rows(target: torch.Tensor) -> torch.Tensor:
    """1-D int64 [n_loss]: the indices of `target` (1-D int64 [N]) that carry loss (not
    -100). Computed where `target` lives: on the host it costs the device no sync, which
    `nonzero` on a GPU tensor would."""
    return (target != -100).nonzero().squeeze(1)


def token_nll(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    chunk: int | None = None,
    rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """Each token's negative log-likelihood under the LM head, without keeping logits.

    Args:
        hidden: 2-D float [N, H], the decoder's final hidden states (requires grad in
            training; the gradient flows back through it).
        weight: 2-D float [V, H], the LM head's weight (frozen: no gradient is returned).
        target: 1-D int64 [N], the id each row predicts; -100 means no loss.
        chunk: rows of logits computed at once (None: `CHUNK_TOKENS` for the products'
            dtype when a gradient is recorded, else `SCORING_CHUNK_TOKENS`).
        rows: `loss_rows(target)` when the caller has it (on the host); None: computed here.

    Returns:
        1-D float32 [N]: `logsumexp(logits) - logits[target]` in nats, 0 where `target`
        is -100. Under autocast the LM-head products run in its dtype (module docstring).
    """
    device = hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
    training = torch.is_grad_enabled() and hidden.requires_grad
    if not training:
        hidden = hidden.detach()  # no gradient buffer, and the scoring path below
    if chunk is None:
        chunk = (CHUNK_TOKENS if training else SCORING_CHUNK_TOKENS).get(dtype, 128)
    if rows is None:
        rows = loss_rows(target)
    return _FusedHeadNLL.apply(hidden, weight, target, rows.to(hidden.device, non_blocking=True), dtype, chunk)


def causal_lm_of(model: Any) -> Any:
    """The transformers causal LM inside `model`: through a rank wrapper (`.module`,
    torch's DistributedDataParallel) and a peft model (`get_base_model()`)."""
    inner = getattr(model, "module", model)
    return inner.get_base_model() if hasattr(inner, "get_base_model") else inner


# transformers model types whose logits are exactly `lm_head(final hidden states)`, a
# bias-free linear map with nothing after it (no soft-capping, scaling or bias); others
# keep their own loss, which is correct for any model and only costs the logits' memory
FUSED_MODEL_TYPES = frozenset(
    {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "olmo", "olmo2", "smollm3"}
)


def head_is_frozen(model: Any) -> bool:
    """True when `model`'s LM head weight takes no gradient (LoRA, the fused loss's case)."""
    head = model.get_output_embeddings()
    return head is not None and not head.weight.requires_grad


def fusable(causal_lm: Any) -> bool:
    """True when the fused NLL equals `causal_lm`'s own loss: a model type of
    `FUSED_MODEL_TYPES` with a decoder of its own (`get_decoder`) and a frozen, bias-free
    LM head. Otherwise callers use the model's own logits."""
    config = getattr(causal_lm, "config", None)
    if getattr(config, "model_type", None) not in FUSED_MODEL_TYPES:
        return False
    if not (hasattr(causal_lm, "get_decoder") and hasattr(causal_lm, "get_output_embeddings")):
        return False
    head = causal_lm.get_output_embeddings()
    return head is not None and getattr(head, "bias", None) is None and head_is_frozen(causal_lm)


def causal_lm_token_nll(model: Any, inputs: dict[str, Any], adapter_off: Any = None) -> torch.Tensor:
    """Run `model` on `inputs` and return each position's NLL of the next label: the
    decoder alone with the LM head fused into the NLL where the causal LM inside it is
    `fusable`, else from the model's own logits.

    Args:
        model: a causal LM or a peft model around one (`causal_lm_of`).
        inputs: the collated batch: `input_ids` [B, T], `labels` [B, T] (-100: no loss),
            `attention_mask` or `position_ids`, and optionally `loss_rows`, 1-D int64: the
            flat [B * T] positions whose next label carries loss (`loss_rows` of the
            shifted labels), found on the host so the device never waits to count them;
            `replay_rows`, `replay_at` and the `base_` inputs
            (`dlm.train.replay_kl.replay_inputs`): positions scored by KL to the base
            model instead, and the base pass that scores them.
        adapter_off: the `dlm.train.replay_kl.AdapterOff` of `model` for the replay
            positions' base pass (None: made here, listing the model's modules).

    Returns:
        2-D float32 [B, T]: position t holds `-log p(labels[t + 1])`, as the model's own
        loss shifts its labels; 0 at the last position and where that label is -100;
        at `replay_rows`, KL(p_base || p) in nats (`dlm.train.replay_kl`).
        Differentiable when grad is on.
    """
    causal_lm = causal_lm_of(model)
    if not _reads_blocks(causal_lm):
        inputs = without_blocks(inputs)
    skip = ("labels", "loss_rows", "replay_rows", "replay_at")
    features = {k: v for k, v in inputs.items() if k not in skip and not k.startswith(BASE)}
    target = _next_labels(inputs["labels"])
    if not fusable(causal_lm):
        logits = model(**features, use_cache=False).logits  # [B, T, V]
        target = target.to(logits.device)
        nll = F.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100, reduction="none"
        ).view(target.shape)
        return _with_replay_kl(model, adapter_off, model, logits, nll, inputs, None)
    decoder = causal_lm.get_decoder()
    hidden = decoder(**features, use_cache=False).last_hidden_state  # [B, T, H]
    batch, length, width = hidden.shape
    flat = target.reshape(-1).to(hidden.device)
    rows = inputs.get("loss_rows")
    weight = causal_lm.get_output_embeddings().weight
    nll = token_nll(hidden.reshape(-1, width), weight, flat, rows=rows).view(batch, length)
    return _with_replay_kl(model, adapter_off, decoder, hidden, nll, inputs, weight)


def _with_replay_kl(
    model: Any,
    adapter_off: Any,
    decoder: Any,
    out: torch.Tensor,
    nll: torch.Tensor,
    inputs: dict[str, Any],
    weight: torch.Tensor | None,
) -> torch.Tensor:
    """`nll` [B, T] with the KL to the base model at `inputs["replay_rows"]`, when given
    (`dlm.train.replay_kl`); `out` is the adapter's hidden states (`weight`: the LM head)
    or logits (`weight` None)."""
    rows = inputs.get("replay_rows")
    if rows is None:
        return nll
    from dlm.train.replay_kl import AdapterOff, put_kl, replay_kl

    if adapter_off is None:
        adapter_off = AdapterOff(getattr(model, "module", model))
    base = {k.removeprefix(BASE): v.to(out.device) for k, v in inputs.items() if k.startswith(BASE)}
    rows, at = rows.to(out.device), inputs["replay_at"].to(out.device)
    return put_kl(nll, rows, replay_kl(adapter_off, decoder, base, out, rows, at, weight))


def _reads_blocks(causal_lm: Any) -> bool:
    """Whether `causal_lm` attends through `dlm.train.attention`, the one attention that
    reads a row's blocks (`dlm.train.row_blocks`); any other model gets none."""
    from dlm.train.attention import NAME

    return getattr(getattr(causal_lm, "config", None), "_attn_implementation", None) == NAME


def _next_labels(labels: torch.Tensor) -> torch.Tensor:
    """[B, T] labels shifted left by one, -100 at the last position."""
    return torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], -100)], dim=1)
