"""Golden test against Hugging Face's MarianMTModel: with our weights copied in, the same
post-LN encoder-decoder gives the same logits and the same greedy translations.

The copy lives in bench/peers.py, so this also proves the decoding benchmark compares one
and the same model.
"""

import sys
from pathlib import Path

import torch

from aiayn import build_model
from aiayn.infer.greedy import greedy_decode
from tests.tolerance import assert_close_to_scale

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
from peers import marian_from  # noqa: E402


def test_marian_with_our_weights_gives_our_logits(tiny):
    config = tiny.replace(tie_embeddings="all", max_len=64)
    model = build_model(config).eval()
    peer = marian_from(model)
    torch.manual_seed(0)
    src, tgt = torch.randint(5, 64, (3, 9)), torch.randint(5, 64, (3, 7))
    src[0, 6:], tgt[1, 5:] = 0, 0  # padding in both
    with torch.no_grad():
        ours, theirs = model(src, tgt), peer(src, tgt)
    real = tgt != 0
    assert_close_to_scale(theirs[real], ours[real])


def test_marian_greedy_generation_equals_ours(tiny):
    config = tiny.replace(tie_embeddings="all", max_len=64)
    torch.manual_seed(1)
    model = build_model(config).eval()
    with torch.no_grad():  # larger weights than at init, so the outputs vary from step to step
        for p in model.parameters():
            p.mul_(3.0)
    peer = marian_from(model)
    src = torch.randint(5, 64, (4, 8))
    src[2, 5:] = 0
    ours = greedy_decode(model, src, max_len_offset=6)
    with torch.no_grad():
        out = peer.model.generate(
            input_ids=src,
            attention_mask=src != 0,
            num_beams=1,
            do_sample=False,
            max_new_tokens=int((src != 0).sum(1).max()) + 6,
        )
    theirs = out[:, 1:]  # drop the decoder start token
    for a, b in zip(ours.tolist(), theirs.tolist(), strict=True):
        a, b = [t for t in a if t != 0], [t for t in b if t != 0]
        assert a == b
    assert len({t for row in ours.tolist() for t in row}) > 4  # not one token repeated
