"""The token tally behind `real tokens:` and the loss tokens per second of a report."""

import numpy as np
import torch

from dlm.train.tracking import TokenTally


def test_the_tally_counts_each_micro_batch_it_is_given_padding_included() -> None:
    tally = TokenTally()
    assert tally.fraction is None
    # [B=2, T=4]: the first position predicts nothing; -100 marks a prompt token or padding
    tally.on_micro_batch(torch.tensor([[5, 6, 7, 8], [5, -100, 9, -100]]))
    tally.on_micro_batch(np.array([[1, -100, -100, 2]]))
    assert tally.processed == 8 + 4
    assert tally.loss_tokens == 3 + 1 + 1
    assert tally.fraction == 5 / 12
