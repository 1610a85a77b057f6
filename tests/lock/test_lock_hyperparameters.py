"""What the lock hashes of a run's settings: precision apart, packing as a mode."""

from dataclasses import asdict

from dlm.lock.record import hyperparameters_sha256
from dlm.train.data import ORDER_MODE
from dlm.train.dropout import MASKS_MODE
from dlm.train.lora import LOOP_MODE, PACKING_MODE, Hyperparameters, lock_hyperparameters
from dlm.train.shared_prefix import ROW_MODE

RUN = Hyperparameters(
    lora_r=8,
    lora_alpha=16,
    lora_dropout=0.05,
    target_modules=("k_proj", "q_proj"),
    learning_rate=2e-4,
    max_steps=20,
    num_epochs=1.0,
    batch_size=4,
    gradient_accumulation_steps=1,
    seed=42,
)


def test_a_windows_run_hashes_its_settings_its_batching_rule_its_row_layout_and_its_loop():
    # no precision, no gradient_checkpointing (neither is a hashed setting); the rule that
    # orders and pads micro-batches sets the shapes, the row layout (a shared prefix once)
    # the rounding, and the loop the arithmetic, so locks written under another rule,
    # layout or loop (the Trainer's `pad_to_multiple_of`, one example per row) hash apart
    no_dropout = Hyperparameters(**{**asdict(RUN), "lora_dropout": 0.0})
    before = {
        **{
            k: v
            for k, v in asdict(no_dropout).items()
            # replay_loss and replay_weight: only with replay
            if k not in ("precision", "gradient_checkpointing", "replay_loss", "replay_weight")
        },
        "sequence_len": 128,
        "packing": False,
    }
    hyper = lock_hyperparameters(no_dropout, 128, False, None)
    assert hyper == {**before, "order": ORDER_MODE, "loop": LOOP_MODE, "rows": ROW_MODE}
    assert hyperparameters_sha256(hyper) != hyperparameters_sha256({**before, "pad_to_multiple_of": 16})
    one_per_row = {k: v for k, v in hyper.items() if k != "rows"}
    assert hyperparameters_sha256(hyper) != hyperparameters_sha256(one_per_row)


def test_dropout_runs_hash_apart_from_locks_written_with_the_old_masks():
    hyper = lock_hyperparameters(RUN, 128, False, None)
    assert hyper["dropout_masks"] == MASKS_MODE
    old = {k: v for k, v in hyper.items() if k != "dropout_masks"}  # masks drawn by torch.rand
    assert hyperparameters_sha256(hyper) != hyperparameters_sha256(old)


def test_precision_is_not_hashed_it_is_the_locks_own_field():
    bf16 = Hyperparameters(**{**asdict(RUN), "precision": "bfloat16"})
    assert lock_hyperparameters(bf16, 128, True, None) == lock_hyperparameters(RUN, 128, True, None)


def test_gradient_checkpointing_is_not_hashed_it_changes_no_number():
    forced = Hyperparameters(**{**asdict(RUN), "gradient_checkpointing": True})
    assert lock_hyperparameters(forced, 128, True, None) == lock_hyperparameters(RUN, 128, True, None)


def test_padding_free_packing_hashes_apart_from_the_old_concatenation():
    old_packed = {**lock_hyperparameters(RUN, 128, False, None), "packing": True}
    new_packed = lock_hyperparameters(RUN, 128, True, None)
    assert new_packed["packing"] == PACKING_MODE
    assert hyperparameters_sha256(new_packed) != hyperparameters_sha256(old_packed)


def test_instruction_share_is_hashed_only_when_set():
    assert "instruction_share" not in lock_hyperparameters(RUN, 128, True, None)
    assert lock_hyperparameters(RUN, 128, True, 0.5)["instruction_share"] == 0.5


def test_the_replay_loss_is_hashed_with_the_replay_share_and_only_then():
    ce = Hyperparameters(**{**asdict(RUN), "replay_loss": "ce"})
    kl = Hyperparameters(**{**asdict(RUN), "replay_loss": "kl"})
    with_ce = lock_hyperparameters(ce, 128, True, None, 0.25)
    with_kl = lock_hyperparameters(kl, 128, True, None, 0.25)
    assert with_ce["replay_loss"] == "ce" and with_kl == {**with_ce, "replay_loss": "kl"}
    assert hyperparameters_sha256(with_kl) != hyperparameters_sha256(with_ce)
    # without replay rows the loss of replay rows trains nothing: the same bytes, the same hash
    assert lock_hyperparameters(kl, 128, True, None) == lock_hyperparameters(ce, 128, True, None)


def test_a_replay_weight_other_than_one_is_hashed_with_the_replay_share():
    weighed = Hyperparameters(**{**asdict(RUN), "replay_weight": 2.0})
    plain = lock_hyperparameters(RUN, 128, True, None, 0.25)
    assert "replay_weight" not in plain  # a factor of 1: the bytes of the loss without one, the old hash
    assert lock_hyperparameters(weighed, 128, True, None, 0.25) == {**plain, "replay_weight": 2.0}
    assert lock_hyperparameters(weighed, 128, True, None) == lock_hyperparameters(RUN, 128, True, None)


def test_synth_repeats_are_hashed_when_synth_rows_train_and_only_then():
    # the sightings of a synth pair are a constant of the code: another dlm that repeats
    # them otherwise trains other bytes from the same document and must not claim its lock
    without = lock_hyperparameters(RUN, 128, True, None, 0.25)
    twice, four = (lock_hyperparameters(RUN, 128, True, None, 0.25, n) for n in (2, 4))
    assert "synth_repeats" not in without and four == {**without, "synth_repeats": 4}
    assert len({hyperparameters_sha256(h) for h in (without, twice, four)}) == 3
