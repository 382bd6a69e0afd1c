"""Decoding runs in torch.inference_mode (no autograd bookkeeping per operator) and hands back
ordinary tensors."""

import torch

from aiayn import build_model
from aiayn.infer.beam import beam_decode
from aiayn.infer.greedy import greedy_decode, greedy_search
from aiayn.infer.sampling import generate, sample_decode


def _record_mode(model) -> list[bool]:
    seen: list[bool] = []
    model.register_forward_pre_hook(lambda *_: seen.append(torch.is_inference_mode_enabled()))
    return seen


def test_decoders_run_in_inference_mode_and_return_ordinary_tensors(tiny):
    model = build_model(tiny).eval()
    src = torch.randint(5, 64, (2, 6))
    for decoder in (model.encoder, model.decoder):
        seen = _record_mode(decoder)
        greedy_decode(model, src)
        beam_decode(model, src, beam=2)
        sample_decode(model, src, generators=None)
        assert seen and all(seen)
    tokens = greedy_decode(model, src)
    out, log_prob = greedy_search(model, src)
    for t in (tokens, out, log_prob):
        assert not t.is_inference()
        t.add_(1)  # a caller may change the result in place (an inference tensor refuses)
    lm = build_model(tiny.replace(family="decoder-only")).eval()
    seen = _record_mode(lm)
    text = generate(lm, torch.randint(5, 64, (1, 3)), max_new_tokens=4, seed=0)
    assert seen and all(seen)
    assert not text.is_inference()
    text[0, 0] = 7
    assert not torch.is_inference_mode_enabled()  # and the mode is left as it was
