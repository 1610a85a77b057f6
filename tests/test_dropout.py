"""Keyed LoRA dropout: masks follow the global micro-batch, whatever process draws them."""

import numpy as np
import torch
from torch import nn

from dlm.train.dropout import KeyedDropout, MicroBatchClock, install_keyed_dropout, mask_key


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(64, 64)
        self.v_proj = nn.Linear(64, 64)

    def forward(self, x):
        return self.v_proj(self.q_proj(x))


def lora_tiny(dropout=0.25):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    model = get_peft_model(
        Tiny(), LoraConfig(r=4, lora_alpha=8, lora_dropout=dropout, target_modules=["q_proj", "v_proj"])
    )
    for name, param in model.named_parameters():
        if "lora_B" in name:  # peft starts B at zero, which would hide every mask
            nn.init.normal_(param)
    return model


def test_mask_depends_on_seed_micro_batch_and_module_only():
    clock = MicroBatchClock()
    clock.tick()
    x = torch.ones(8, 256)
    a, b = KeyedDropout(0.25, 7, 0, clock), KeyedDropout(0.25, 7, 0, clock)
    torch.manual_seed(1)
    first = a(x)
    torch.manual_seed(2)  # the global generator plays no part
    assert torch.equal(first, b(x))
    assert not torch.equal(first, KeyedDropout(0.25, 7, 1, clock)(x))
    assert not torch.equal(first, KeyedDropout(0.25, 8, 0, clock)(x))
    clock.tick()
    assert not torch.equal(first, a(x))
    assert torch.equal(first.unique(), torch.tensor([0.0, 1 / 0.75]))
    assert abs(float((first == 0).float().mean()) - 0.25) < 0.03
    assert torch.equal(a.eval()(x), x)


def test_rank_r_of_w_counts_micro_batches_r_plus_jw():
    clock = MicroBatchClock(rank=1, world_size=2)
    seen = []
    for _ in range(3):
        clock.tick()
        seen.append(clock.index)
    assert seen == [1, 3, 5]
    assert mask_key(1, 3, 0) != mask_key(1, 3, 1) != mask_key(1, 4, 0)


def test_second_rank_draws_the_masks_of_the_single_process_second_micro_batch():
    single, rank1 = lora_tiny(), lora_tiny()
    one, two = MicroBatchClock(), MicroBatchClock(rank=1, world_size=2)
    assert install_keyed_dropout(single, seed=5, clock=one) == 2
    assert install_keyed_dropout(rank1, seed=5, clock=two) == 2
    single.train(), rank1.train()
    x = torch.randn(3, 64)
    with torch.no_grad():
        one.tick()
        single(x)  # micro-batch 0
        one.tick()
        out_single = single(x)  # micro-batch 1
        again = single(x)  # a recomputed forward of the same micro-batch: the same masks
        two.tick()
        out_rank1 = rank1(x)  # rank 1 of 2: micro-batch 1
        one.tick()
        out_next = single(x)  # micro-batch 2
    assert torch.equal(out_single, out_rank1) and torch.equal(out_single, again)
    assert not torch.equal(out_single, out_next)


def test_zero_dropout_leaves_peft_identity_alone():
    assert install_keyed_dropout(lora_tiny(dropout=0.0), seed=5, clock=MicroBatchClock()) == 0


def test_cpu_masks_are_sfc64_draws_with_p_rounded_to_a_65536th():
    from dlm.train.dropout import keep_mask

    cpu = torch.device("cpu")
    keep, share = keep_mask(torch.Size([64, 1024]), 0.05, 12345, cpu)
    assert keep.dtype == torch.bool and keep.shape == (64, 1024)
    assert share == (65536 - 3277) / 65536  # round(0.05 * 65536) = 3277 dropped levels of 65536
    assert abs(1 - float(keep.float().mean()) - 3277 / 65536) < 0.003
    again, _ = keep_mask(torch.Size([64, 1024]), 0.05, 12345, cpu)
    assert torch.equal(keep, again)
    assert not torch.equal(keep, keep_mask(torch.Size([64, 1024]), 0.05, 12346, cpu)[0])
    # the stream is pinned: NumPy's SFC64 raw words, read as little-endian 16-bit draws
    words = np.random.SFC64(12345).random_raw(2)
    draws = np.asarray(words, dtype="<u8").view("<u2")
    assert keep.flatten()[:8].tolist() == (draws >= 3277).tolist()
    # the expected output is the input
    x = torch.ones(256, 1024)
    out = x * keep_mask(x.shape, 0.25, 7, cpu)[0] / keep_mask(x.shape, 0.25, 7, cpu)[1]
    assert abs(float(out.mean()) - 1.0) < 0.01
    # p close to 1 still keeps one level in 65536 rather than dividing by zero
    nearly_all, tiny_share = keep_mask(torch.Size([8]), 0.99999999, 1, cpu)
    assert tiny_share == 1 / 65536
