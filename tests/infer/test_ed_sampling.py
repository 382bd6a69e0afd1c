"""Sampling from the encoder-decoder (Phuong & Hutter 2022, Algorithm 15)."""

import pytest
import torch

from aiayn import build_model
from aiayn.data.tokenizer import BOS, EOS, PAD
from aiayn.infer.greedy import greedy_decode
from aiayn.infer.sampling import (
    Sampling,
    row_generators,
    sample_decode,
    sampling_distribution,
)
from tests.tolerance import assert_close_to_scale

OFFSET = 6


@pytest.fixture
def model(tiny):
    return build_model(tiny).eval()


@pytest.fixture
def src():
    rows = [[7, 8, 9, 10, 11, EOS], [12, 13, EOS], [14, 15, 16, 17, EOS]]
    width = max(map(len, rows))
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])  # (3, 6)


def tokens_of(hyps):
    return [[h.tokens for h in n_best] for n_best in hyps]


def greedy_lists(model, src):
    out = greedy_decode(model, src, max_len_offset=OFFSET)
    return [[[t for t in row if t != PAD]] for row in out.tolist()]


def test_temperature_to_zero_and_top_k_one_equal_greedy(model, src):
    greedy = greedy_lists(model, src)
    assert any(len(g[0]) > 1 for g in greedy)
    gens = row_generators(5, range(3))
    assert tokens_of(sample_decode(model, src, 0.0, max_len_offset=OFFSET)) == greedy
    assert tokens_of(sample_decode(model, src, 1e-5, generators=gens, max_len_offset=OFFSET)) == (
        greedy
    )
    gens = row_generators(5, range(3))
    top1 = sample_decode(model, src, 1.0, top_k=1, generators=gens, max_len_offset=OFFSET)
    assert tokens_of(top1) == greedy
    # and at temperature 1 without a filter the samples are not the greedy output
    gens = row_generators(5, range(3), n=4)
    assert tokens_of(sample_decode(model, src, 1.0, generators=gens, n=4)) != [
        g * 4 for g in greedy
    ]


def test_a_fixed_seed_reproduces_and_another_seed_differs(model, src):
    def draw(seed):
        gens = row_generators(seed, range(3), n=4)
        hyps = sample_decode(model, src, 0.9, top_p=0.95, generators=gens, n=4)
        return tokens_of(hyps), [[h.score for h in n_best] for n_best in hyps]

    first, again = draw(1), draw(1)
    assert first == again
    assert first[0] != draw(2)[0]
    assert all(len(n_best) == 4 for n_best in first[0])
    assert len({tuple(t) for t in first[0][0]}) > 1  # the 4 samples of a sentence differ


def test_sampling_in_a_batch_equals_sampling_alone(model, src):
    seed, n = 11, 3
    batched = sample_decode(
        model, src, 1.2, top_k=30, generators=row_generators(seed, [0, 1, 2], n), n=n
    )
    for i in range(3):
        length = int((src[i] != PAD).sum())
        alone = sample_decode(
            model,
            src[i : i + 1, :length],
            1.2,
            top_k=30,
            generators=row_generators(seed, [i], n),
            n=n,
        )[0]
        assert [h.tokens for h in alone] == [h.tokens for h in batched[i]]
        assert_close_to_scale([h.score for h in batched[i]], [h.score for h in alone])


def test_each_sentence_keeps_its_own_length_limit_and_the_score_is_the_model_log_prob(model, src):
    gens = row_generators(0, range(3), n=8)
    hyps = sample_decode(model, src, 3.0, generators=gens, n=8, max_len_offset=2)  # long tails
    hit_limit = 0
    for i, n_best in enumerate(hyps):
        limit = int((src[i] != PAD).sum()) + 2
        for h in n_best:
            assert 1 <= len(h.tokens) <= limit
            assert EOS not in h.tokens[:-1]
            hit_limit += h.tokens[-1] != EOS and len(h.tokens) == limit
            # teacher-forced log P(sample | source) under the model, temperature 1
            tgt = torch.tensor([[BOS] + h.tokens[:-1]])
            logp = torch.log_softmax(model(src[i : i + 1], tgt).double(), -1)[0]  # (T, V)
            expected = logp[torch.arange(len(h.tokens)), torch.tensor(h.tokens)].sum().item()
            assert_close_to_scale(h.score, expected)
    assert hit_limit > 0  # some samples ran to their limit (the test covers that path)


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> tuple[float, int]:
    """Pearson's statistic and its degrees of freedom, cells with expected count < 5 pooled."""
    expected = probs.double() * counts.sum()
    small = expected < 5
    obs = torch.cat([counts[~small].double(), counts[small].double().sum()[None]])
    exp = torch.cat([expected[~small], expected[small].sum()[None]])
    if exp[-1] == 0:  # nothing to pool
        obs, exp = obs[:-1], exp[:-1]
    return float(((obs - exp) ** 2 / exp).sum()), len(exp) - 1


def p_value(stat: float, df: int) -> float:
    """P(Chi2(df) >= stat)."""
    return float(torch.special.gammaincc(torch.tensor(df / 2.0), torch.tensor(stat / 2.0)))


@pytest.mark.parametrize("setting", [(0.8, 0, 1.0), (1.3, 12, 1.0), (0.8, 20, 0.8)])
def test_first_token_frequencies_follow_the_filtered_softmax(model, setting):
    temperature, top_k, top_p = setting
    src = torch.tensor([[20, 21, 22, EOS]])
    with torch.no_grad():
        logits = model(src, torch.tensor([[BOS]]))[:, -1]  # (1, V): the first step's logits
    logits[:, PAD] = float("-inf")  # padding is never drawn
    probs = sampling_distribution(logits, temperature, top_k, top_p)[0]  # (V,)
    m = 20_000
    gens = row_generators(1234, [0], n=m)
    # max_len_offset 1 - |src|: every sample stops after its first token
    hyps = sample_decode(model, src, temperature, top_k, top_p, gens, n=m, max_len_offset=-3)[0]
    first = torch.tensor([h.tokens[0] for h in hyps])
    counts = torch.bincount(first, minlength=probs.numel())
    assert counts[probs == 0].sum() == 0  # nothing outside the top-k / top-p set
    stat, df = chi_square(counts, probs)
    assert df >= 5 and p_value(stat, df) > 1e-3
    # the same counts reject a wrong distribution: the test has the power to fail
    for wrong in (
        sampling_distribution(logits, temperature * 1.25, top_k, top_p)[0],
        sampling_distribution(logits, 1.0, 0, 1.0)[0],  # temperature 1, no filter
    ):
        assert p_value(*chi_square(counts, wrong)) < 1e-6


def test_sampling_settings_are_validated():
    for bad in (
        dict(temperature=-0.5),
        dict(temperature=float("nan")),
        dict(temperature=float("inf")),
        dict(top_k=0),
        dict(top_p=0.0),
        dict(top_p=1.5),
        dict(top_p=float("nan")),
        dict(seed=-1),
    ):
        field = next(iter(bad))
        with pytest.raises(ValueError, match=field):
            Sampling(**bad)
    assert Sampling(temperature=0.0).temperature == 0.0  # 0 = greedy, explicitly allowed
