"""Beam search against a scripted decoder with hand-set step probabilities, and against greedy."""

import copy
import math

import pytest
import torch

from aiayn import ModelConfig, build_model
from aiayn.data.tokenizer import BOS, EOS
from aiayn.infer.beam import beam_decode, beam_search, best_tokens, length_penalty
from aiayn.infer.greedy import greedy_decode, greedy_search
from aiayn.model import layout
from aiayn.model.layout import column_major_weights, pack_linears
from tests.tolerance import assert_close_to_scale

V = 8  # ids: 0 pad, 1 unk, 2 bos, 3 eos, 4.. words
A, B, C = 4, 5, 6


class Scripted:
    """Next-token probabilities keyed by the prefix generated so far (bos excluded)."""

    def __init__(self, table: dict[tuple, dict[int, float]], batch: int, beam: int):
        self.table, self.k = table, beam
        self.prefixes = [() for _ in range(batch * beam)]

    def step(self, last: torch.Tensor) -> torch.Tensor:
        out = torch.full((len(self.prefixes), V), -1e9)
        for row, token in enumerate(last[:, 0].tolist()):
            if token != BOS:
                self.prefixes[row] = self.prefixes[row] + (token,)
            probs = self.table.get(self.prefixes[row], {EOS: 1.0})
            for t, p in probs.items():
                out[row, t] = math.log(p)
        return out

    def reorder(self, index: torch.Tensor) -> None:
        self.prefixes = [self.prefixes[i] for i in index.tolist()]


def run(table, beam, alpha, max_len=10, nbest=1, batch=1, early_stop=False):
    s = Scripted(table, batch, beam)
    return beam_search(
        s.step, s.reorder, batch, beam, torch.tensor(max_len), alpha, nbest, early_stop=early_stop
    )


def test_expected_hypotheses_and_scores():
    table = {
        (): {A: 0.6, B: 0.4},
        (A,): {EOS: 0.3, C: 0.7},
        (B,): {EOS: 0.9, C: 0.1},
        (A, C): {EOS: 1.0},
        (B, C): {EOS: 1.0},
    }
    hyps = run(table, beam=2, alpha=0.0, nbest=2)[0]
    # A C eos: .6*.7 = .42 ; B eos: .4*.9 = .36 ; A eos: .18 ; B C eos: .04
    assert [h.tokens for h in hyps] == [[A, C, EOS], [B, EOS]]
    assert_close_to_scale(hyps[0].log_prob, math.log(0.42))
    assert_close_to_scale(hyps[1].score, math.log(0.36))


def test_length_penalty_lets_a_longer_hypothesis_win():
    # short: eos right away with p=.5 ; long: A A A A eos with p=.45 in all
    table = {(): {EOS: 0.5, A: 0.5}}
    table.update({(A,) * n: {A: 0.98, EOS: 0.02} for n in range(1, 4)})
    table[(A,) * 4] = {EOS: 0.94}
    short, long_ = math.log(0.5), math.log(0.5 * 0.98**3 * 0.94)
    assert long_ < short  # without a penalty the short one wins...
    assert run(table, beam=2, alpha=0.0)[0][0].tokens == [EOS]
    # ...with alpha = 1.5 the normalised long one wins, though it ends long after the short one
    assert long_ / length_penalty(5, 1.5) > short / length_penalty(1, 1.5)
    best = run(table, beam=2, alpha=1.5)[0][0]
    assert best.tokens == [A, A, A, A, EOS]
    assert_close_to_scale(best.score, long_ / length_penalty(5, 1.5))


def test_early_stop_can_miss_what_the_exact_search_finds():
    # after step 1 the live A scores .6 and dips to .36 at step 2: the heuristic, judging it
    # as if it finished now, gives up; the exact search follows it to a better, longer end
    table = {
        (): {EOS: 0.5, A: 0.5},
        (A,): {A: 0.6, EOS: 0.4},
        (A, A): {A: 0.99, EOS: 0.01},
        (A, A, A): {A: 0.999, EOS: 0.001},
        (A, A, A, A): {EOS: 1.0},
    }
    exact = run(table, beam=2, alpha=1.5)[0][0]
    early = run(table, beam=2, alpha=1.5, early_stop=True)[0][0]
    assert exact.tokens == [A, A, A, A, EOS] and early.tokens == [EOS]
    assert exact.score > early.score


def test_max_len_cuts_live_hypotheses():
    table = {(A,) * n: {A: 1.0} for n in range(0, 20)}
    hyp = run(table, beam=2, alpha=0.6, max_len=3)[0][0]
    assert hyp.tokens == [A, A, A]


def test_batched_scripted_sentences_are_independent():
    table = {(): {A: 0.6, B: 0.4}, (A,): {EOS: 1.0}, (B,): {EOS: 1.0}}
    hyps = run(table, beam=3, alpha=0.6, batch=3)
    assert all(h[0].tokens == [A, EOS] for h in hyps)


@pytest.fixture(scope="module", params=["row-major", "column-major", "onednn"])
def trained_copy_model(request, _trained_copy_model):
    """The model below, with its linear weights as built (row-major) and as a model directory
    loads them on a CPU (column-major: ``aiayn.model.layout``; with oneDNN's prepacked products
    where they are the default): every invariant holds in each."""
    model = copy.deepcopy(_trained_copy_model)
    if request.param != "row-major":
        column_major_weights(model)
    if request.param != "onednn":
        yield model
        return
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    pack_linears(model)
    with pytest.MonkeyPatch.context() as patch:  # this tiny model's products all on oneDNN
        patch.setattr(layout, "ONEDNN_MACS", 0)
        yield model


@pytest.fixture(scope="module")
def _trained_copy_model():
    """A tiny model trained briefly on a copy task, so its distributions are peaked."""
    from aiayn import ModelConfig

    torch.manual_seed(0)
    config = ModelConfig.preset("tiny", dropout=0.0, embedding_dropout=0.0, vocab_size=16)
    model = build_model(config)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        src = torch.randint(4, 16, (32, 6))
        tgt_in = torch.cat([torch.full((32, 1), BOS), src], 1)
        tgt_out = torch.cat([src, torch.full((32, 1), EOS)], 1)
        loss = torch.nn.functional.cross_entropy(
            model(src, tgt_in).flatten(0, 1), tgt_out.flatten()
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def test_beam_one_equals_greedy(trained_copy_model):
    src = torch.randint(4, 16, (5, 6))
    greedy = greedy_decode(trained_copy_model, src, max_len_offset=4)
    beam = best_tokens(beam_decode(trained_copy_model, src, beam=1, alpha=0.0, max_len_offset=4))
    width = max(greedy.size(1), beam.size(1))
    pad = lambda t: torch.nn.functional.pad(t, (0, width - t.size(1)))  # noqa: E731
    assert torch.equal(pad(greedy), pad(beam))


def test_batched_beam_equals_one_by_one(trained_copy_model):
    src = torch.tensor([[5, 6, 7, 8, 0, 0], [9, 10, 11, 12, 13, 14], [4, 4, 5, 0, 0, 0]])
    batched = beam_decode(trained_copy_model, src, beam=4, nbest=3)
    for i in range(3):
        one = beam_decode(
            trained_copy_model, src[i : i + 1, : int((src[i] != 0).sum())], beam=4, nbest=3
        )
        assert [h.tokens for h in batched[i]] == [h.tokens for h in one[0]]
        assert_close_to_scale([h.score for h in batched[i]], [h.score for h in one[0]])


def test_beam_finds_the_copy(trained_copy_model):
    src = torch.tensor([[5, 9, 7, 12, 4, 15]])
    assert beam_decode(trained_copy_model, src, beam=4)[0][0].tokens == [5, 9, 7, 12, 4, 15, EOS]


def test_cached_greedy_makes_the_same_tokens_as_recomputing(trained_copy_model):
    model = trained_copy_model
    src = torch.tensor([[5, 9, 7, 12, 0, 0], [4, 15, 6, 6, 8, 11]])
    cached = greedy_decode(model, src, max_len_offset=3)
    memory, src_mask = model.encode(src)
    tokens = torch.full((2, 1), BOS)
    for _ in range(cached.size(1)):  # recompute the whole prefix at every step, no cache
        logits = model.decode(tokens, memory, src_mask)[:, -1]
        tokens = torch.cat([tokens, logits.argmax(-1, keepdim=True)], 1)
    done = torch.zeros(2, dtype=torch.bool)
    for t in range(cached.size(1)):  # compare up to each row's eos
        live = ~done
        assert torch.equal(cached[live, t], tokens[live, t + 1])
        done |= cached[:, t] == EOS


def test_batched_greedy_equals_one_by_one_with_each_sentence_its_own_limit():
    # an untrained model rarely makes eos: most sentences run to their own length limit
    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("tiny", vocab_size=40)).eval()
    src = torch.tensor([[5, 6, 7, 8, 9, 10, 11], [9, 10, 0, 0, 0, 0, 0], [4, 4, 5, 6, 0, 0, 0]])
    batched = greedy_decode(model, src, max_len_offset=3)
    assert batched.size(1) == 7 + 3
    for i in range(3):
        n = int((src[i] != 0).sum())
        one = greedy_decode(model, src[i : i + 1, :n], max_len_offset=3)[0]
        assert one.size(0) <= n + 3
        row = batched[i]
        assert torch.equal(row[: one.size(0)], one)
        assert (row[one.size(0) :] == 0).all()


def repeated_memory_beam(model, src, beam, alpha=0.6, max_len_offset=50, nbest=1):
    """Beam search the way it was written before the beams shared their source: memory and
    mask repeated per beam, one copy of the cross-attention keys and values per beam."""
    memory, src_mask = model.encode(src)
    memory = memory.repeat_interleave(beam, dim=0)  # (B*K, S, D)
    state = model.new_state(src_mask.repeat_interleave(beam, dim=0))  # one row per beam

    def step(tokens):
        logits = model.decode(tokens, memory, state=state)[:, -1]
        return torch.log_softmax(logits.float(), dim=-1)

    max_len = (src != 0).sum(1) + max_len_offset
    return beam_search(
        step,
        lambda i: state.reorder(i, same_sources=True),
        src.size(0),
        beam,
        max_len,
        alpha,
        nbest,
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_beams_sharing_their_source_equal_repeated_memory(norm_first):
    # an untrained model: flat distributions, many live hypotheses, sentences of every length
    torch.manual_seed(1)
    config = ModelConfig.preset("tiny", vocab_size=40, norm_first=norm_first)
    model = build_model(config).eval()
    src = torch.tensor([[5, 6, 7, 8, 9, 10, 11], [9, 10, 0, 0, 0, 0, 0], [4, 4, 5, 6, 0, 0, 0]])
    shared = beam_decode(model, src, beam=4, nbest=3, max_len_offset=4)
    repeated = repeated_memory_beam(model, src, beam=4, nbest=3, max_len_offset=4)
    for a, b in zip(shared, repeated, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert_close_to_scale([h.score for h in a], [h.score for h in b])


def test_greedy_without_scores_makes_the_same_tokens(trained_copy_model):
    src = torch.tensor([[5, 9, 7, 12, 0, 0], [4, 15, 6, 6, 8, 11]])
    tokens, log_prob = greedy_search(trained_copy_model, src, max_len_offset=3)
    bare, none = greedy_search(trained_copy_model, src, max_len_offset=3, scores=False)
    assert torch.equal(bare, tokens) and none is None and log_prob.shape == (2,)
    assert torch.equal(greedy_decode(trained_copy_model, src, max_len_offset=3), tokens)
