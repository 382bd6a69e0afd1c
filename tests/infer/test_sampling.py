import pytest
import torch

from aiayn import build_model
from aiayn.infer.sampling import filter_logits, generate, sample_next


def test_temperature_near_zero_equals_greedy():
    logits = torch.randn(64, 50)
    draws = sample_next(logits, temperature=1e-4)
    assert torch.equal(draws, logits.argmax(-1, keepdim=True))
    assert torch.equal(sample_next(logits, temperature=0), logits.argmax(-1, keepdim=True))


def test_top_k_never_leaves_the_top_k():
    logits = torch.randn(8, 30)
    top5 = logits.topk(5, dim=-1).indices
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        draws = sample_next(logits, temperature=2.0, top_k=5, generator=g)
        assert (draws == top5).any(-1).all()


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    kept = torch.isfinite(filter_logits(probs.log(), top_p=0.75))
    assert kept.tolist() == [[True, True, False, False]]
    kept = torch.isfinite(filter_logits(probs.log(), top_p=0.1))
    assert kept.tolist() == [[True, False, False, False]]  # the best token always survives


@pytest.mark.parametrize("top_p", [5e-324, 1e-45, 1e-12])
def test_a_tiny_top_p_keeps_exactly_the_most_likely_token(top_p):
    """A top_p below float32's smallest number rounds to 0 in the comparison with the mass of
    the better tokens: the most likely token must survive all the same."""
    logits = torch.randn(16, 40)
    kept = torch.isfinite(filter_logits(logits, top_p=top_p))
    assert torch.equal(kept, logits == logits.max(-1, keepdim=True).values)
    g = torch.Generator().manual_seed(0)
    draws = sample_next(logits, temperature=1.0, top_p=top_p, generator=g)
    assert torch.equal(draws, logits.argmax(-1, keepdim=True))


def test_sampling_frequencies_follow_the_distribution():
    probs = torch.tensor([0.6, 0.3, 0.1])
    g = torch.Generator().manual_seed(1)
    draws = sample_next(probs.log().expand(20000, 3), generator=g)[:, 0]
    freq = torch.bincount(draws, minlength=3) / 20000
    torch.testing.assert_close(freq, probs, atol=0.015, rtol=0)  # absolute: ~4 sd of 20000 draws


def test_bad_settings_are_errors():
    with pytest.raises(ValueError, match="temperature"):
        sample_next(torch.randn(1, 4), temperature=-1)
    with pytest.raises(ValueError, match="top_p"):
        sample_next(torch.randn(1, 4), top_p=0.0)


def test_generation_with_a_seed_is_reproducible_and_uses_the_cache(tiny):
    model = build_model(tiny.replace(family="decoder-only")).eval()
    prompt = torch.randint(5, 64, (2, 4))
    a = generate(model, prompt, 10, temperature=1.0, top_k=10, seed=3)
    b = generate(model, prompt, 10, temperature=1.0, top_k=10, seed=3)
    assert torch.equal(a, b) and a.shape == (2, 14) and torch.equal(a[:, :4], prompt)
    greedy = generate(model, prompt, 6, temperature=0)
    full = prompt
    for _ in range(6):  # the same continuation without any cache
        full = torch.cat([full, model(full)[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(greedy, full)


def test_generation_past_the_context_slides_the_window(tiny):
    model = build_model(tiny.replace(family="decoder-only")).eval()
    seen = []
    position = model.embed.position
    original = position.forward

    def spy(x, offset=0):
        seen.append(offset + x.size(1))
        return original(x, offset)

    position.forward = spy
    out = generate(model, torch.randint(5, 64, (1, 6)), 40, temperature=0, context=16)
    assert out.shape == (1, 46)
    assert max(seen) <= 16  # never a position the model was not trained on
    # greedy with a window equals greedy recomputed on exactly those windows
    assert torch.equal(out, generate(model, out[:, :6], 40, temperature=0, context=16))
