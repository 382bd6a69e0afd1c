"""Classification pooling over a row that is all padding stays finite (zeros)."""

import pytest
import torch

from aiayn import build_model
from aiayn.data.tokenizer import PAD
from tests.tolerance import assert_close_to_scale


@pytest.mark.parametrize("pooling", ["max", "mean", "first"])
def test_an_all_padding_row_pools_to_zeros_in_eval_and_training(tiny, pooling):
    config = tiny.replace(family="encoder-only", n_classes=3, pooling=pooling, dropout=0.3)
    model = build_model(config)
    tokens = torch.tensor([[7, 8, 9, PAD], [PAD, PAD, PAD, PAD], [10, 11, PAD, PAD]])  # (3, 4)
    model.eval()
    h = model.encode(tokens)  # (3, 4, D)
    pooled = model.pool(h, tokens)  # (3, D)
    assert torch.equal(pooled[1], torch.zeros_like(pooled[1]))
    assert pooled[[0, 2]].abs().sum(-1).min() > 0  # real rows are not zeroed
    logits = model.classify(tokens)  # (3, C)
    assert torch.isfinite(logits).all()
    head = model.classifier[1]
    assert_close_to_scale(logits[1], head.bias)  # zeros through the linear head
    alone = model.classify(tokens[[0, 2]])  # the padding row changes nothing else
    assert_close_to_scale(logits[[0, 2]], alone)
    model.train()
    logits = model.classify(tokens)
    assert torch.isfinite(logits).all()
    logits.sum().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
