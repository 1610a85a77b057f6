"""`dlm export --verify`: check an export against peft, and say which check ran.

Checks (each returns a `VerifyResult`):

- `llama.cpp-runtime` (gguf, ollama; when `llama_cpp` is importable): the base GGUF
  with and without the exported adapter in llama.cpp, against the transformers base
  with and without the peft adapter, on `HELD_OUT_TEXT`. Numbers: top-1 agreement of
  the adapted models, the relative error of the adapter's logit change
  `||(L_a - L_0) - (P_a - P_0)|| / ||P_a - P_0||`, and each side's NLL gain
  (nats/token). Pass: with a float32 base GGUF, top-1 100% and error <= 2%; with a
  quantized base, the NLL gains within 0.015 nats/token or 2% of peft's gain, whichever
  is larger (llama.cpp multiplies quantized weights by activations it quantizes to 8
  bits, an error that grows with the adapter's change, hence the share; and a weak
  adapter's gain near zero is within that noise, hence the floor; docs/benchmarks.md,
  "`dlm export --verify` over a quantized base", has the gaps measured).
- `gguf-tensors` (gguf, ollama; otherwise): every tensor read back with
  `gguf.GGUFReader` equals peft's under the layout rules of `dlm.export.layout`,
  the names match one to one, and `adapter.lora.alpha` is what the scale needs.
- `merged-logits` (merged): the reloaded folder's logits against peft's on
  `HELD_OUT_TEXT` (max abs difference relative to the max abs logit, pass <= 1e-4 for
  float32; for float16/bfloat16, top-1 agreement >= 95% and the adapter effect below).
- `gguf-merged-llama.cpp` (gguf-merged, when `llama_cpp` is importable) or
  `gguf-merged-weights` (otherwise: the GGUF read back and dequantized by transformers'
  own GGUF loader, which undoes llama.cpp's rotary row order independently of the
  converter): the merged GGUF's logits against peft's.

Every check that runs a model also reports the adapter effect, which catches a runtime
or a file that silently serves the base. For the export's logits E, the base's P_0 and
peft's P_a (`[n_tokens, vocab]`):

    adapter_effect         <E - P_0, P_a - P_0> / ||P_a - P_0||^2   1: the adapter's whole
                           change is there, 0: none of it (the base); rounding noise
                           (f16, q8_0) is nearly orthogonal to the change and barely moves it
    adapter_effect_error   ||(E - P_0) - (P_a - P_0)|| / ||P_a - P_0||   (noise included)
    top1_agreement_with_base

A check passes only with `adapter_effect` within `EFFECT_RANGE` (0.75 to 1.25), so an
export that behaves like the base fails whatever its other numbers. (For the
llama.cpp runtime the base is llama.cpp's own run of the base GGUF.)
- `peft-load` (peft): the exported safetensors file is byte-identical to the store's;
  every adapter tensor names a linear module of the base with the shapes it needs (a
  runtime matching adapters by module name, as vLLM does, finds them all); the folder
  loaded as transformers loads it (`AutoModelForCausalLM.from_pretrained(OUT)`) changes
  the base's output (the adapter effect below).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HELD_OUT_TEXT = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, carrying a can of oil "
    "and a cloth. From the gallery he could see the fishing boats returning to the harbour, their "
    "lanterns swinging with the swell. He wrote the weather in a small notebook: wind from the "
    "north-west, visibility good, a falling barometer. Later, by the light of the lamp, he read "
    "letters from his sister, who lived in the city and wrote about trams, markets and the price of bread."
)
F32_TOP1, F32_DELTA_ERROR, QUANT_NLL_GAP, QUANT_NLL_SHARE, MERGED_TOLERANCE = 1.0, 0.02, 0.015, 0.02, 1e-4
HALF_TOP1, EFFECT_RANGE = 0.95, (0.75, 1.25)


@dataclass(frozen=True)
class VerifyResult:
    """Which check ran, whether it passed, and its numbers (names in the module docstring)."""

    check: str
    passed: bool
    numbers: dict[str, float] = field(default_factory=dict)
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "passed": self.passed, "numbers": dict(self.numbers), "detail": self.detail}


def llama_cpp_available() -> bool:
    """True when the `llama_cpp` runtime (llama-cpp-python) can be imported."""
    return importlib.util.find_spec("llama_cpp") is not None


def verify_gguf_tensors(gguf_path: Path, adapter_dir: Path, base_config: Path, alpha: float) -> VerifyResult:
    """Compare a GGUF adapter's tensors and alpha with the peft folder (module docstring)."""
    import numpy as np
    from gguf import GGUFReader

    from dlm.export.layout import expected_gguf_tensors

    expected = expected_gguf_tensors(
        adapter_dir / "adapter_model.safetensors", json.loads(Path(base_config).read_text())
    )
    reader = GGUFReader(gguf_path)
    got = {t.name: np.array(t.data) for t in reader.tensors}
    alpha_field = reader.fields.get("adapter.lora.alpha")
    got_alpha = float(alpha_field.contents()) if alpha_field is not None else float("nan")
    missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    diffs = [
        float(np.abs(got[n] - expected[n]).max()) if got[n].shape == expected[n].shape else float("inf")
        for n in sorted(set(expected) & set(got))
    ]
    max_diff = max(diffs, default=float("inf"))
    passed = not missing and not extra and max_diff == 0.0 and abs(got_alpha - alpha) <= 1e-6 * max(1.0, alpha)
    detail = (
        ""
        if passed
        else (
            f"missing {missing[:3]}, unexpected {extra[:3]}, max |diff| {max_diff}, "
            f"alpha {got_alpha} (expected {alpha})"
        )
    )
    return VerifyResult(
        "gguf-tensors", passed, {"tensors": float(len(got)), "max_abs_diff": max_diff, "alpha": got_alpha}, detail
    )


def _nll(logits: Any, ids: Any) -> float:
    import numpy as np

    shifted = logits[:-1] - logits[:-1].max(axis=-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return float(-logp[np.arange(len(ids) - 1), ids[1:]].mean())


def peft_logits(base: Path | Any, adapter_dir: Path, ids: list[int]) -> tuple[Any, Any]:
    """Float32 logits `[n_tokens, vocab]` of the base alone and with the peft adapter.

    Args:
        base: the base model's folder, or the float32 model itself (then wrapped by peft).
    """
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32) if isinstance(base, Path) else base
    peft = PeftModel.from_pretrained(model, adapter_dir).eval()
    batch = torch.tensor([ids])
    with torch.no_grad():
        adapted = peft(input_ids=batch).logits[0].numpy()
        with peft.disable_adapter():
            base = peft(input_ids=batch).logits[0].numpy()
    return base, adapted


def _llama_logits(base_gguf: Path, lora: Path | None, ids: list[int]) -> Any:
    import numpy as np
    from llama_cpp import Llama

    kwargs: dict[str, Any] = {"lora_path": str(lora)} if lora is not None else {}
    llm = Llama(
        model_path=str(base_gguf), n_ctx=max(512, len(ids) + 8), logits_all=True, verbose=False, seed=0, **kwargs
    )
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)], dtype=np.float32)


def gguf_is_float32(path: Path) -> bool:
    """True when every tensor of the GGUF at `path` is F32 (an unquantized base)."""
    from gguf import GGMLQuantizationType, GGUFReader

    return all(t.tensor_type == GGMLQuantizationType.F32 for t in GGUFReader(path).tensors)


def quantized_nll_tolerance(gain_peft: float) -> float:
    """How far (nats/token) llama.cpp's NLL gain over a quantized base may sit from peft's
    `gain_peft`: 0.015, or 2% of the gain when that is larger (module docstring)."""
    return max(QUANT_NLL_GAP, QUANT_NLL_SHARE * abs(gain_peft))


def verify_llama_cpp(
    gguf_adapter: Path, base_gguf: Path, base_dir: Path, adapter_dir: Path, tokenizer: Any, text: str = HELD_OUT_TEXT
) -> VerifyResult:
    """Run llama.cpp with and without the exported adapter against peft (module docstring)."""
    import numpy as np

    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    p0, pa = peft_logits(base_dir, adapter_dir, ids)
    l0, la = _llama_logits(base_gguf, None, ids), _llama_logits(base_gguf, gguf_adapter, ids)
    top1 = float((la.argmax(-1) == pa.argmax(-1)).mean())
    delta_err = float(np.linalg.norm((la - l0) - (pa - p0)) / np.linalg.norm(pa - p0))
    gain_llama = _nll(l0, np.array(ids)) - _nll(la, np.array(ids))
    gain_peft = _nll(p0, np.array(ids)) - _nll(pa, np.array(ids))
    f32 = gguf_is_float32(base_gguf)
    if f32:
        passed = top1 >= F32_TOP1 and delta_err <= F32_DELTA_ERROR
    else:
        passed = abs(gain_llama - gain_peft) <= quantized_nll_tolerance(gain_peft)
    effect = adapter_effect(la, l0, l0 + (pa - p0))  # against llama.cpp's own run of the base
    passed = passed and effect_ok(effect)
    numbers = {
        "tokens": float(len(ids)),
        "top1_agreement": top1,
        "logit_delta_rel_error": delta_err,
        "top1_agreement_with_base": effect["top1_agreement_with_base"],
        "adapter_effect": effect["adapter_effect"],
        "nll_gain_llama_cpp": gain_llama,
        "nll_gain_peft": gain_peft,
        "nll_llama_cpp": _nll(la, np.array(ids)),
        "nll_peft": _nll(pa, np.array(ids)),
    }
    detail = f"base GGUF {'float32' if f32 else 'quantized'}: {base_gguf.name}"
    return VerifyResult("llama.cpp-runtime", passed, numbers, detail)


def adapter_effect(export: Any, base: Any, adapted: Any) -> dict[str, float]:
    """Numbers of an export's logits `[n_tokens, vocab]` against the base's and peft's
    (module docstring): top-1 agreement with each, and `adapter_effect_error`."""
    import numpy as np

    change = (adapted - base).astype(np.float64)
    norm2 = float((change * change).sum())
    moved = (export - base).astype(np.float64)
    return {
        "top1_agreement": float((export.argmax(-1) == adapted.argmax(-1)).mean()),
        "top1_agreement_with_base": float((export.argmax(-1) == base.argmax(-1)).mean()),
        "adapter_effect": float((moved * change).sum() / norm2) if norm2 > 0 else float("nan"),
        "adapter_effect_error": float(np.linalg.norm(moved - change) / np.sqrt(norm2)) if norm2 > 0 else float("inf"),
    }


def effect_ok(numbers: dict[str, float]) -> bool:
    """The export carries the adapter's change (`adapter_effect` within `EFFECT_RANGE`)."""
    low, high = EFFECT_RANGE
    return low <= numbers["adapter_effect"] <= high


def verify_merged(
    merged_dir: Path, base_dir: Path, adapter_dir: Path, tokenizer: Any, text: str = HELD_OUT_TEXT
) -> VerifyResult:
    """Reload the merged folder and compare its logits with peft's (module docstring)."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    p0, pa = peft_logits(base_dir, adapter_dir, ids)
    merged = AutoModelForCausalLM.from_pretrained(merged_dir).eval()
    dtype = str(merged.dtype).removeprefix("torch.")
    with torch.no_grad():
        ma = merged.float()(input_ids=torch.tensor([ids])).logits[0].numpy()
    rel = float(np.abs(ma - pa).max() / np.abs(pa).max())
    numbers = {"tokens": float(len(ids)), "max_rel_diff": rel, **adapter_effect(ma, p0, pa)}
    if dtype == "float32":
        passed = rel <= MERGED_TOLERANCE
    else:
        passed = numbers["top1_agreement"] >= HALF_TOP1
    passed = passed and effect_ok(numbers)
    return VerifyResult("merged-logits", passed, numbers, f"weights {dtype}")


def verify_gguf_merged(
    out_dir: Path, base_dir: Path, adapter_dir: Path, tokenizer: Any, text: str = HELD_OUT_TEXT
) -> VerifyResult:
    """Run the merged GGUF (llama.cpp when importable, else transformers' GGUF loader)
    against peft on `text` (module docstring). Pass: top-1 agreement >= 95% and the
    adapter effect within `EFFECT_RANGE`."""
    import torch
    from transformers import AutoModelForCausalLM

    from dlm.export.merged_gguf import MODEL_GGUF

    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    p0, pa = peft_logits(base_dir, adapter_dir, ids)
    if llama_cpp_available():
        check, logits = "gguf-merged-llama.cpp", _llama_logits(out_dir / MODEL_GGUF, None, ids)
    else:
        check = "gguf-merged-weights"
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # one line per check on the terminal, not a bar per tensor
        model = AutoModelForCausalLM.from_pretrained(out_dir, gguf_file=MODEL_GGUF, dtype=torch.float32).eval()
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0].numpy()
    numbers = {"tokens": float(len(ids)), **adapter_effect(logits, p0, pa)}
    passed = numbers["top1_agreement"] >= HALF_TOP1 and effect_ok(numbers)
    return VerifyResult(check, passed, numbers)


def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def unmatched_modules(adapter_weights: Path, model: Any) -> list[str]:
    """Adapter tensors (`base_model.model.<module>.lora_A/B.weight`) whose module is not
    a linear layer of `model` with matching shapes (`lora_A` `[r, in]`, `lora_B` `[out, r]`)."""
    from safetensors import safe_open

    modules = dict(model.named_modules())
    bad = []
    with safe_open(str(adapter_weights), framework="numpy") as fh:
        for key in fh.keys():
            module, _, kind = key.removeprefix("base_model.model.").rpartition(".lora_")
            target, shape = modules.get(module), fh.get_slice(key).get_shape()
            weight = getattr(target, "weight", None)
            if weight is None or weight.dim() != 2:
                bad.append(key)
            elif (kind.startswith("A") and shape[1] != weight.shape[1]) or (
                kind.startswith("B") and shape[0] != weight.shape[0]
            ):
                bad.append(key)
    return sorted(bad)


def verify_peft(
    out_dir: Path, base_dir: Path, adapter_dir: Path, tokenizer: Any, text: str = HELD_OUT_TEXT
) -> VerifyResult:
    """The peft folder: the store's bytes, module names the base has, and the adapter's
    change when transformers loads the folder itself (module docstring)."""
    import torch
    from transformers import AutoModelForCausalLM

    name = "adapter_model.safetensors"
    same = _sha(out_dir / name) == _sha(adapter_dir / name)
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    unmatched = unmatched_modules(out_dir / name, base)  # before peft wraps the modules
    p0, pa = peft_logits(base, adapter_dir, ids)
    loaded = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = loaded(input_ids=torch.tensor([ids])).logits[0].numpy()
    numbers = {"tokens": float(len(ids)), "unmatched_modules": float(len(unmatched)), **adapter_effect(logits, p0, pa)}
    passed = same and not unmatched and effect_ok(numbers)
    detail = "; ".join(
        ([] if same else [f"{name} differs from the store's"])
        + ([f"modules the base lacks: {', '.join(unmatched[:3])}"] if unmatched else [])
    )
    return VerifyResult("peft-load", passed, numbers, detail)
