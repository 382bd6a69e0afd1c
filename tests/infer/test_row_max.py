"""row_max: greedy decoding's maximum per row, found by blocks, is exactly torch.max's."""

import pytest
import torch

from aiayn.infer import greedy
from aiayn.infer.greedy import BLOCK, ROW_MAX_FROM, row_max


def assert_same_max(logits):
    values, indices = row_max(logits)
    want_values, want_indices = logits.max(-1)
    assert torch.equal(indices, want_indices)
    nan = want_values.isnan()
    assert torch.equal(values.isnan(), nan)
    assert torch.equal(values[~nan], want_values[~nan])


@pytest.mark.parametrize("vocab", [4000, 4007, 37000, 4 * BLOCK, 4 * BLOCK + 1])
@pytest.mark.parametrize("rows", [1, 20, 131])
def test_row_max_is_torch_max_with_its_ties_and_nans(vocab, rows, monkeypatch):
    monkeypatch.setattr(greedy, "ROW_MAX_FROM", 0)  # the blocks, at every size
    gen = torch.Generator().manual_seed(vocab * 1000 + rows)
    logits = torch.randn(rows, vocab, generator=gen)
    logits[0, 3] = logits[0, vocab - 1] = 50.0  # a tie across blocks: the first wins
    if rows > 1:
        logits[1, BLOCK + 2] = logits[1, BLOCK + 9] = 50.0  # a tie inside one block
        logits[1, :BLOCK] = float("-inf")
    if rows > 4:
        logits[2, vocab - 1] = 60.0  # the last logit, in a short last block if there is one
        logits[3, 7] = logits[3, 9] = float("nan")  # NaN is the maximum, as torch.max has it
        logits[4] = 1.0  # all equal
    assert_same_max(logits)


@pytest.mark.parametrize("shape", [(2, 1000), (ROW_MAX_FROM, 4 * BLOCK - 1), (ROW_MAX_FROM, 1)])
def test_small_or_narrow_logits_take_torch_max(shape):
    assert_same_max(torch.randn(shape))  # too narrow for blocks: torch.max, no error


def test_no_rows(monkeypatch):
    monkeypatch.setattr(greedy, "ROW_MAX_FROM", 0)
    values, indices = row_max(torch.randn(0, 4000))
    assert values.shape == indices.shape == (0,)
