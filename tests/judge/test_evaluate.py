"""Held-out loss over fixed examples: the arithmetic, masking and model state."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from uniformlm import LogitsLM, UniformLM

from dlm.tokenize.seam import TokenizedRows
from dlm.train.evaluate import EvalExample, EvalSet, build_eval_set, eval_window, heldout_loss


class OracleLM(LogitsLM):
    """Predicts token t+1 = token t + 1 with near certainty."""

    def __init__(self, vocab: int) -> None:
        super().__init__(vocab)
        self.w = torch.nn.Parameter(torch.zeros(1))

    def logits(self, input_ids):
        return torch.nn.functional.one_hot((input_ids + 1) % self.vocab, self.vocab).float() * 50


def example(ids: list[int], n_prompt: int = 0, kind: str = "prose") -> EvalExample:
    a = np.array(ids, dtype=np.int64)
    return EvalExample(a, np.where(np.arange(len(ids)) >= n_prompt, a, -100), kind)


def test_uniform_model_scores_ln_vocab_per_loss_token():
    model = UniformLM(7)
    model.train()
    result = heldout_loss(model, EvalSet([example([1, 2, 3, 4]), example([5, 6], kind="source")]))
    assert result.loss == pytest.approx(math.log(7)) and result.perplexity == pytest.approx(7.0)
    assert result.loss_tokens == 3 + 1 and result.tokens == 6 and result.rows == 2
    assert model.training  # mode restored


def test_only_answer_tokens_count_and_by_kind_splits_them():
    model = OracleLM(10)
    right = example([1, 2, 3, 4, 5], n_prompt=3, kind="instruction")  # answer 4, 5 predicted well
    wrong = example([1, 5, 0], kind="prose")  # 1->5 and 5->0 are both mispredicted
    result = heldout_loss(model, EvalSet([right, wrong]))
    assert result.loss_tokens == 2 + 2
    assert result.by_kind["instruction"] < 1e-6
    assert result.by_kind["prose"] > 10
    assert result.loss == pytest.approx((result.by_kind["prose"] * 2) / 4)


def test_eval_window_keeps_the_answer_in_view():
    assert eval_window(100, 0, 32) == (0, 32)
    assert eval_window(10, 0, 32) == (0, 10)
    assert eval_window(100, 40, 32) == (24, 56)  # half a window of prompt, then the answer
    assert eval_window(41, 40, 32) == (24, 41)
    assert eval_window(40, 40, 32) is None  # no answer token at all


def test_build_eval_set_cuts_one_window_per_row():
    ids = [np.arange(50, dtype=np.uint16), np.arange(5, dtype=np.uint16)]
    rows = TokenizedRows(
        lengths=np.array([50, 5]),
        n_prompt=np.array([0, 3], dtype=np.int32),
        keys=["a", "b"],
        read=ids.__getitem__,
        kinds=["source", "instruction"],
    )
    eval_set = build_eval_set(rows, 16)
    assert [e.input_ids.shape[0] for e in eval_set.examples] == [16, 5]
    assert eval_set.examples[1].labels.tolist() == [-100, -100, -100, 3, 4]
    assert eval_set.kinds == {"source": 1, "instruction": 1}


def test_empty_set_is_refused():
    with pytest.raises(ValueError):
        heldout_loss(UniformLM(3), EvalSet([]))


def test_bfloat16_scoring_runs_under_autocast_and_stays_close_to_float32():
    from tinyllama import tiny_llama

    model = tiny_llama(vocab_size=64)
    ids = [5, 9, 13, 17, 21, 25, 29, 33]
    seen: list[torch.dtype] = []
    hook = model.model.layers[0].self_attn.q_proj.register_forward_hook(lambda m, a, out: seen.append(out.dtype))
    fp32 = heldout_loss(model, EvalSet([example(ids)]))
    bf16 = heldout_loss(model, EvalSet([example(ids)]), precision="bfloat16")
    hook.remove()
    assert seen == [torch.float32, torch.bfloat16]  # the second pass ran its products in bfloat16
    assert bf16.loss != fp32.loss and bf16.loss == pytest.approx(fp32.loss, rel=1e-2)
