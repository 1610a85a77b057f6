"""What an adapter folder holds, and which export targets can express it.

`read_adapter` reads a peft LoRA folder (as the store keeps it under
`adapter/versions/vNNNN/`: `adapter_config.json` plus `adapter_model.safetensors`)
into an `AdapterInfo`. `refusals(info, fmt)` applies one small rule per property and
returns every problem at once; `check_exportable` raises them as one `ExportRefused`.

Where the rules come from:
- embeddings / `lm_head` (`modules_to_save`, `target_modules`, `trainable_token_indices`
  or such tensors): llama.cpp's converter stops on them, vLLM requires
  `modules_to_save` to be empty, and a base with tied embeddings cannot keep a
  changed head in a merged folder without untying it;
- DoRA: neither llama.cpp nor vLLM runs it (merge it instead: `merged`, `gguf-merged`);
- scaling: llama.cpp scales each tensor by `adapter.lora.alpha / rank` (one alpha
  per file, the rank from the tensor), so rsLoRA (`alpha / sqrt(r)`) is expressible
  as `alpha * sqrt(r)` only when every tensor has the same rank, and a per-module
  `alpha_pattern` is not expressible at all; vLLM computes one scale from the
  config's `r` and `lora_alpha`, so `rank_pattern`/`alpha_pattern` are refused;
- rank: vLLM's `--max-lora-rank` takes one of `VLLM_MAX_LORA_RANKS`
  (`vllm.config.lora.MaxLoRARanks`); an adapter above the largest cannot load.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm.errors import ExportError, ExportRefused

FORMATS = ("gguf", "ollama", "merged", "peft", "gguf-merged")
MERGING_FORMATS = ("merged", "gguf-merged")
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
EMBEDDING_MODULES = ("embed_tokens", "lm_head", "wte", "wpe", "embed_in", "embed_out")
VLLM_MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


@dataclass(frozen=True)
class AdapterInfo:
    """A peft LoRA adapter folder, read but not loaded into a model.

    Attributes:
        folder: the adapter folder.
        config: `adapter_config.json` as a dict.
        r: the config's LoRA rank; `ranks` holds the ranks the tensors really have.
        alpha: `lora_alpha` (float).
        tensor_names: names in `adapter_model.safetensors`, sorted.
        ranks: distinct ranks of the `lora_A` tensors (rows of each `[r, in]` matrix).
    """

    folder: Path
    config: dict[str, Any]
    r: int
    alpha: float
    tensor_names: tuple[str, ...]
    ranks: tuple[int, ...]

    @property
    def use_rslora(self) -> bool:
        return bool(self.config.get("use_rslora"))

    @property
    def use_dora(self) -> bool:
        return bool(self.config.get("use_dora"))

    @property
    def max_rank(self) -> int:
        return max(self.ranks, default=self.r)

    def gguf_alpha(self) -> float:
        """The `adapter.lora.alpha` that makes llama.cpp's `alpha / rank` equal peft's scale.

        Plain LoRA: `lora_alpha`. rsLoRA (scale `alpha / sqrt(r)`): `alpha * sqrt(r)`,
        valid only with one rank for every tensor (see `refusals`).
        """
        if self.use_rslora:
            return self.alpha * math.sqrt(self.max_rank)
        return self.alpha


def read_adapter(folder: Path) -> AdapterInfo:
    """Read `folder`'s config and tensor names (no weights are loaded).

    Raises:
        ExportError: the folder, its config or its safetensors file is missing, the
            config is not JSON, or the adapter is not a LoRA.
    """
    from safetensors import safe_open

    folder = Path(folder)
    config_path, weights = folder / ADAPTER_CONFIG, folder / ADAPTER_WEIGHTS
    if not config_path.is_file() or not weights.is_file():
        raise ExportError(
            f"{folder}: no adapter here ({ADAPTER_CONFIG} and {ADAPTER_WEIGHTS} expected); "
            f"train one with `dlm train`, or pick another --adapter-version"
        )
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ExportError(f"{config_path}: not valid JSON ({exc}); retrain to rewrite it") from None
    if not isinstance(config, dict) or config.get("peft_type") != "LORA":
        kind = config.get("peft_type") if isinstance(config, dict) else type(config).__name__
        raise ExportRefused(f"{config_path}: peft_type {kind!r}; only LoRA adapters export")
    try:
        r, alpha = int(config.get("r", 0)), float(config.get("lora_alpha", 0))
    except (TypeError, ValueError):
        raise ExportError(
            f"{config_path}: r {config.get('r')!r} and lora_alpha {config.get('lora_alpha')!r} "
            f"must be numbers; retrain to rewrite it"
        ) from None
    ranks: set[int] = set()
    try:
        with safe_open(str(weights), framework="numpy") as fh:
            names = tuple(sorted(fh.keys()))
            for name in names:
                if name.endswith("lora_A.weight"):
                    ranks.add(int(fh.get_slice(name).get_shape()[0]))
    except Exception as exc:  # safetensors raises its own SafetensorError for a damaged header
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ExportError(f"{weights}: not a readable safetensors file ({reason}); retrain with `dlm train`") from None
    return AdapterInfo(folder=folder, config=config, r=r, alpha=alpha, tensor_names=names, ranks=tuple(sorted(ranks)))


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [str(k) for k in value]
    return [str(v) for v in value or ()]


def _embedding_rule(info: AdapterInfo, fmt: str) -> list[str]:
    found: set[str] = set()
    for key in ("modules_to_save", "target_modules", "trainable_token_indices"):
        for name in _names(info.config.get(key)):
            if any(part in name for part in EMBEDDING_MODULES):
                found.add(f"{key} names {name!r}")
    for tensor in info.tensor_names:
        if "lora_embedding" in tensor or any(f".{part}." in tensor for part in EMBEDDING_MODULES):
            found.add(f"tensor {tensor!r}")
    if not found:
        return []
    return [
        f"the adapter carries embeddings or lm_head ({'; '.join(sorted(found))}), which llama.cpp, "
        f"vLLM and a tied-embedding merge cannot take; retrain with target_modules limited to "
        f"attention/MLP projections"
    ]


def _dora_rule(info: AdapterInfo, fmt: str) -> list[str]:
    if info.use_dora and fmt not in MERGING_FORMATS:
        return [
            "use_dora is true: DoRA does not run in llama.cpp or vLLM; export --format merged or gguf-merged instead"
        ]
    return []


def _scaling_rule(info: AdapterInfo, fmt: str) -> list[str]:
    alpha_pattern, rank_pattern = info.config.get("alpha_pattern") or {}, info.config.get("rank_pattern") or {}
    if fmt in ("gguf", "ollama"):
        if alpha_pattern:
            return [
                f"alpha_pattern {sorted(alpha_pattern)} gives modules their own alpha; a GGUF adapter has "
                f"one alpha per file; export --format merged instead"
            ]
        if info.use_rslora and len(info.ranks) > 1:
            return [
                f"rsLoRA with ranks {list(info.ranks)}: llama.cpp scales by alpha/rank with one alpha, "
                f"so alpha/sqrt(r) holds for one rank only; export --format merged instead"
            ]
    if fmt == "peft" and (alpha_pattern or rank_pattern):
        return [
            "rank_pattern/alpha_pattern: vLLM computes one scale from r and lora_alpha; export --format merged instead"
        ]
    return []


def _rank_rule(info: AdapterInfo, fmt: str) -> list[str]:
    if fmt == "peft" and info.max_rank > VLLM_MAX_LORA_RANKS[-1]:
        return [
            f"rank {info.max_rank} is above vLLM's largest --max-lora-rank ({VLLM_MAX_LORA_RANKS[-1]}); "
            f"retrain with a smaller lora_r or export --format merged"
        ]
    return []


RULES = (_embedding_rule, _dora_rule, _scaling_rule, _rank_rule)


def refusals(info: AdapterInfo, fmt: str) -> list[str]:
    """Every reason `fmt` cannot express `info` (empty when it can)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return [problem for rule in RULES for problem in rule(info, fmt)]


def check_exportable(info: AdapterInfo, fmt: str) -> None:
    """Raise `ExportRefused` naming every problem when `fmt` cannot express `info`."""
    problems = refusals(info, fmt)
    if problems:
        raise ExportRefused(f"{info.folder / ADAPTER_CONFIG}: cannot export as {fmt}: " + "; ".join(problems))


def vllm_max_lora_rank(rank: int) -> int:
    """The smallest `--max-lora-rank` vLLM accepts that holds `rank` (see module docstring)."""
    for allowed in VLLM_MAX_LORA_RANKS:
        if rank <= allowed:
            return allowed
    raise ExportRefused(f"rank {rank} is above vLLM's largest --max-lora-rank ({VLLM_MAX_LORA_RANKS[-1]})")
