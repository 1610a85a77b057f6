"""Token-by-token decoding of a loaded causal LM: the one decoding loop of both
`dlm prompt` (`dlm.infer.generate`) and `dlm serve` (`dlm.serve.generation`).

`TorchEngine` wraps a `dlm.infer.InferenceModel` (or anything with `model` and
`tokenizer`) and yields generated ids one at a time from a plain loop over the
model's forward pass with its KV cache (kept over HF `generate` with a streamer: a
loop that yields ids stops the model within one step when the caller stops reading,
with no thread, and both commands then give the same ids by construction). Each id is one
decoding step, so a caller that stops iterating (the client went away, a stop
string matched, the server is shutting down) stops the model within one step;
closing the generator frees its KV cache.

Prefill (the forward pass over the prompt) runs in chunks of `prefill_chunk` ids
(`DEFAULT_PREFILL_CHUNK`), each extending the KV cache, with the caller's
`cancelled()` consulted between chunks as between decoding steps: a client that goes
away during a long prompt frees the model within one chunk, not after the whole
prompt. The chunks give the logits of one pass over the whole prompt (the same causal
attention over the same keys, up to float rounding; tests/serve/test_prefill.py
checks it and the greedy ids on SmolLM2); a pass makes logits `[chunk, vocab]` and
only the last position's are kept, so a long prompt never holds `[n_prompt, vocab]`
logits at once. What chunking costs and saves: docs/benchmarks.md.

Sampling: greedy when `temperature == 0`; otherwise softmax((logits - max) /
temperature) in float64, then nucleus (`top_p`) filtering, then a draw from a
`torch.Generator` seeded with the request's `seed` (a random seed when None).
Subtracting the max before dividing keeps every temperature > 0 finite: with
`temperature` 1e-300 every logit but the largest goes to -inf and the draw is greedy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_PREFILL_CHUNK = 256  # prompt ids per prefill forward pass (module docstring)


@dataclass(frozen=True)
class Sampling:
    """How to pick each next id.

    Attributes:
        temperature: 0 for greedy, else > 0 (the API allows up to 2).
        top_p: nucleus mass in [0, 1]; 1 keeps every id, 0 only the most likely one.
        seed: seeds the draw (same seed, prompt and settings: same reply); None: random.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None


def eos_ids(tokenizer: Any, model: Any = None) -> frozenset[int]:
    """Ids that end a reply: the tokenizer's `eos_token_id` and the model's
    `generation_config.eos_token_id` (an int or a list)."""
    found: set[int] = set()
    for value in (
        getattr(tokenizer, "eos_token_id", None),
        getattr(getattr(model, "generation_config", None), "eos_token_id", None),
    ):
        if isinstance(value, int):
            found.add(value)
        elif isinstance(value, (list, tuple)):
            found.update(int(v) for v in value)
    return frozenset(found)


class TorchEngine:
    """The server's engine over a loaded model (see module docstring).

    Args:
        loaded: has `model` (a transformers causal LM, or a `peft.PeftModel` holding
            named adapters) and `tokenizer`; `model_id` and `system_prompt` when it
            stands for one document (`dlm.infer.InferenceModel` fits).
        prefill_chunk: prompt ids per prefill forward pass (>= 1; module docstring).
    """

    def __init__(self, loaded: Any, *, prefill_chunk: int = DEFAULT_PREFILL_CHUNK):
        if prefill_chunk < 1:
            raise ValueError(f"prefill_chunk must be >= 1, got {prefill_chunk}")
        self.prefill_chunk = prefill_chunk
        self.loaded = loaded
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.model_id: str = getattr(loaded, "model_id", "model")
        self.system_prompt: str | None = getattr(loaded, "system_prompt", None)
        self.eos_token_ids = eos_ids(self.tokenizer, self.model)
        config = getattr(self.model, "config", None)
        value = getattr(config, "max_position_embeddings", None)
        self.max_model_len: int | None = int(value) if value else None
        self._active: str | None = None  # the adapter peft has active; set_adapter walks every module

    def load_adapter(self, adapter_dir: Path, name: str) -> None:
        """Add the peft adapter in `adapter_dir` as `name` (the caller keeps generation out)."""
        from dlm.infer.adapters import attach_adapter

        self.model = attach_adapter(self.model, adapter_dir, name)
        self.model.eval()

    def delete_adapter(self, name: str) -> None:
        """Free adapter `name` (the caller keeps generation out)."""
        self.model.delete_adapter(name)
        self._active = None  # peft activates another one when the active one goes

    def generate_ids(
        self,
        input_ids: list[int],
        *,
        max_new_tokens: int,
        sampling: Sampling,
        adapter: str | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> Iterator[int]:
        """Yield up to `max_new_tokens` generated ids, one per decoding step; the last
        is an EOS id when the model ended the reply.

        Args:
            input_ids: 1-D list[int] [n_prompt], the prompt ids.
            adapter: the peft adapter to generate with; None: the base model alone.
            cancelled: consulted between prefill chunks and between decoding steps;
                once it returns True the generator ends (no more forward passes).
        """
        with self._adapter(adapter):
            yield from self._decode(input_ids, max_new_tokens, sampling, cancelled or _never)

    def prefill(self, input_ids: list[int], cancelled: Callable[[], bool] | None = None) -> tuple[Any, Any]:
        """Run the prompt through the model in chunks of `prefill_chunk` ids.

        Args:
            input_ids: 1-D list[int] [n_prompt], n_prompt >= 1.
            cancelled: consulted before each chunk after the first.

        Returns:
            (the KV cache, float64 logits `[vocab]` of the last prompt position on the
            CPU), or (None, None) when `cancelled()` said so before the last chunk.
        """
        import torch

        device = self.model.device
        past: Any = None
        logits: Any = None
        with torch.inference_mode():
            for start in range(0, len(input_ids), self.prefill_chunk):
                if start and cancelled is not None and cancelled():
                    return None, None
                chunk = torch.tensor([input_ids[start : start + self.prefill_chunk]], dtype=torch.long, device=device)
                mask = torch.ones((1, start + chunk.shape[1]), dtype=torch.long, device=device)
                out = self.model(input_ids=chunk, attention_mask=mask, past_key_values=past, use_cache=True)
                past = out.past_key_values
                logits = out.logits[0, -1].double().cpu()  # (vocab,)
                del out
        return past, logits

    @contextmanager
    def _adapter(self, name: str | None) -> Iterator[None]:
        is_peft = hasattr(self.model, "disable_adapter") and hasattr(self.model, "peft_config")
        if name is not None:
            if not is_peft:
                raise ValueError(f"adapter {name!r} requested but the model holds no adapters")
            if name != self._active:  # a switch costs a walk over every LoRA layer
                self.model.set_adapter(name)
                self._active = name
            yield
        elif is_peft:
            with self.model.disable_adapter():
                yield
        else:
            yield

    def _decode(
        self, input_ids: list[int], max_new_tokens: int, sampling: Sampling, cancelled: Callable[[], bool]
    ) -> Iterator[int]:
        import torch

        device = self.model.device
        generator = torch.Generator(device="cpu")
        if sampling.seed is None:
            generator.seed()
        else:
            generator.manual_seed(sampling.seed)
        if max_new_tokens < 1:
            return
        past, logits = self.prefill(input_ids, cancelled)
        if logits is None or cancelled():  # cancelled during prefill
            return
        token = _pick(logits, sampling, generator)
        yield token
        n_seen = len(input_ids)
        with torch.inference_mode():
            for _ in range(max_new_tokens - 1):
                if token in self.eos_token_ids or cancelled():
                    return
                n_seen += 1
                ids = torch.tensor([[token]], dtype=torch.long, device=device)  # (1, 1)
                mask = torch.ones((1, n_seen), dtype=torch.long, device=device)
                out = self.model(input_ids=ids, attention_mask=mask, past_key_values=past, use_cache=True)
                past = out.past_key_values
                token = _pick(out.logits[0, -1].double().cpu(), sampling, generator)  # logits (vocab,)
                yield token


def _never() -> bool:
    return False


def _pick(logits: Any, sampling: Sampling, generator: Any) -> int:
    """One id from `logits` (1-D float64 [vocab])."""
    import torch

    if sampling.temperature == 0:
        return int(torch.argmax(logits))
    scaled = (logits - logits.max()) / sampling.temperature
    probs = torch.softmax(scaled, dim=-1)
    if sampling.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        outside = before >= sampling.top_p
        outside[0] = False  # the most likely id is always kept (top_p 0 keeps it alone)
        sorted_probs[outside] = 0.0
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    return int(torch.multinomial(probs, 1, generator=generator))
