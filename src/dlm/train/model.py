"""Every change `dlm` makes to a base model before training, in one place: `prepare_model`.

The steps, in order, each a function of its own module with its own test:

1. `add_lora`: a peft LoRA adapter of rank `r` and scale `alpha / r` on the named linear
   layers (`Hyperparameters.target_modules`); the base weights stay frozen.
2. `hold_frozen_weights` (`dlm.train.precision`): in a bfloat16 run the frozen linears and
   the embedding table are stored in bfloat16 once, instead of being cast on every
   forward; LoRA's own weights stay float32.
3. `share_lora_input_casts` (`dlm.train.shared_cast`, bfloat16 only): one bfloat16 copy
   of a layer input that several LoRA A matrices read.
4. `recompute_silu_products` (`dlm.train.swiglu`): the gated MLP keeps `gate` and `up`
   for backward, not `silu(gate)` too.
5. `use_dlm_attention` (`dlm.train.attention`): on a CPU under bfloat16 autocast short
   sequences attend in float32, and grouped key/value heads stay grouped.
6. `install_keyed_dropout` (`dlm.train.dropout`): LoRA dropout masks keyed by the global
   micro-batch index the loop sets (`MicroBatchClock`), so ranks and accumulation agree.
7. gradient checkpointing when the activations would not fit (`dlm.train.lora`).
8. `FusedLossModel`: the module the loop calls. Its forward runs the decoder and returns
   each position's NLL with the LM head fused into the loss (`dlm.train.lm_loss`): the
   `[B, T, V]` logits never exist. DDP wraps this module, so the parameters a forward
   used are found from its output as usual.

Nothing is registered for the process or patched on a class: every change lives on the
model instance returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from dlm.train.dropout import MicroBatchClock


class FusedLossModel(nn.Module):
    """A peft causal LM whose forward returns per-token NLL instead of logits.

    Attributes:
        peft_model: the peft-wrapped causal LM (what `save_pretrained` saves).
        clock: the micro-batch clock the keyed dropout reads; the loop sets
            `clock.index` before each training forward.
    """

    def __init__(self, peft_model: nn.Module, clock: MicroBatchClock) -> None:
        super().__init__()
        self.peft_model = peft_model
        self.clock = clock
        self._adapter_off: Any = None  # `dlm.train.replay_kl.AdapterOff`, made at the first replay KL

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        loss_rows: torch.Tensor | None = None,
        replay_rows: torch.Tensor | None = None,
        replay_at: torch.Tensor | None = None,
        base_input_ids: torch.Tensor | None = None,
        base_attention_mask: torch.Tensor | None = None,
        base_position_ids: torch.Tensor | None = None,
        **row_blocks: torch.Tensor,
    ) -> torch.Tensor:
        """Per-token NLL of a collated micro-batch (`dlm.train.shared_prefix.micro_batch`).

        Args:
            input_ids: int64 [B, T].
            labels: int64 [B, T], -100 where no loss is taken.
            attention_mask: int64 [B, T] (windows), bool [1, 1, T, T] (one row of
                several examples), or None (packed blocks).
            position_ids: int64 [B, T] restarting at each packed example or continuing a
                row's shared prefix, or None.
            loss_rows: int64 [n_loss], the flat positions that carry loss (`dlm.train.data`).
            replay_rows, replay_at: int64 [n], replay positions scored by KL to the base
                model, and where each sits in the base pass's output; `base_*`: the base
                pass's inputs (`dlm.train.replay_kl.replay_inputs`); or None.
            row_blocks: one row's attention blocks (`dlm.train.row_blocks.KEYS`), and the
                base pass's under `base_`-prefixed names, where the batch has them.

        Returns:
            float32 [B, T]: position t holds `-log p(labels[t + 1])` in nats, 0 at the last
            position and where that label is -100, KL(p_base || p) at `replay_rows`
            (`dlm.train.lm_loss.causal_lm_token_nll`).

        Raises:
            TypeError: a keyword argument that is none of the above.
        """
        from dlm.train.lm_loss import causal_lm_token_nll

        given = {
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "loss_rows": loss_rows,
            "replay_rows": replay_rows,
            "replay_at": replay_at,
            "base_input_ids": base_input_ids,
            "base_attention_mask": base_attention_mask,
            "base_position_ids": base_position_ids,
        }
        from dlm.train.row_blocks import is_block_key

        unknown = sorted(k for k in row_blocks if not is_block_key(k))
        if unknown:
            raise TypeError(f"FusedLossModel.forward() got unexpected keyword arguments {unknown}")
        given.update(row_blocks)
        inputs = {"input_ids": input_ids, "labels": labels, **{k: v for k, v in given.items() if v is not None}}
        if replay_rows is not None and self._adapter_off is None:
            from dlm.train.replay_kl import AdapterOff

            self._adapter_off = AdapterOff(self.peft_model)
        return causal_lm_token_nll(self.peft_model, inputs, self._adapter_off)


@dataclass(frozen=True)
class ModelPlan:
    """What `prepare_model` needs besides the base model.

    Attributes:
        hyper: the run's `dlm.train.lora.Hyperparameters` (LoRA, precision, seed).
        rank, world_size: this process's place among the ranks (keyed dropout).
        forwards_done: training forwards this rank made before a checkpoint it resumes.
        checkpointing: whether to recompute activations in backward.
    """

    hyper: Any
    rank: int = 0
    world_size: int = 1
    forwards_done: int = 0
    checkpointing: bool = False


def add_lora(model: nn.Module, hyper: Any) -> Any:
    """`model` wrapped by peft with a fresh LoRA adapter (`r`, `alpha`, dropout, targets
    from `hyper`); LoRA's weights are made in float32 from torch's global generator."""
    import warnings

    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=hyper.lora_r,
        lora_alpha=hyper.lora_alpha,
        lora_dropout=hyper.lora_dropout,
        target_modules=sorted(hyper.target_modules),
        task_type="CAUSAL_LM",
    )
    with warnings.catch_warnings():
        # peft reads transformers' deprecated `is_gradient_checkpointing`: a notice for peft, not the user
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        return get_peft_model(model, config)


def prepare_model(base: nn.Module, plan: ModelPlan) -> FusedLossModel:
    """Apply the steps of the module docstring to `base` (a float32 causal LM, frozen) and
    return the module the loop trains.

    The LoRA weights are drawn from torch's global generator seeded with `hyper.seed`
    here, so the adapter's initialization is a function of the seed alone.
    """
    from dlm.train.attention import use_dlm_attention
    from dlm.train.dropout import install_keyed_dropout
    from dlm.train.precision import hold_frozen_weights
    from dlm.train.shared_cast import share_lora_input_casts
    from dlm.train.swiglu import recompute_silu_products

    hyper = plan.hyper
    torch.manual_seed(hyper.seed)
    peft_model = add_lora(base, hyper)
    hold_frozen_weights(peft_model, hyper.precision)  # after the wrap: LoRA stays float32
    if hyper.precision == "bfloat16":
        share_lora_input_casts(peft_model)
    recompute_silu_products(peft_model)
    use_dlm_attention(peft_model)
    clock = MicroBatchClock(plan.rank, plan.world_size, plan.forwards_done)
    install_keyed_dropout(peft_model, hyper.seed, clock)
    causal_lm: Any = peft_model.get_base_model()
    causal_lm.config.use_cache = False  # a cache would hide the packed examples' boundaries
    if plan.checkpointing:
        causal_lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    peft_model.train()
    return FusedLossModel(peft_model, clock)
