"""Searches that seldom wait for the device: beam search reads one table back per step and
keeps its bookkeeping on the host; greedy search looks at its finished rows every few steps.
Both give what the searches that read back at every turn gave (``beam_reference``; greedy's
``check_every=1``), and the host syncs are counted (``syncs``)."""

import gzip
import itertools

import pytest
import torch

import aiayn
from aiayn import ModelConfig, build_model
from aiayn.data.tokenizer import BOS, EOS, PAD
from aiayn.infer import beam as beam_module
from aiayn.infer.beam import beam_decode, beam_search
from aiayn.infer.greedy import greedy_search
from aiayn.infer.translate import source_ids
from tests.conftest import REPO_ROOT
from tests.infer.beam_reference import reference_beam_search
from tests.infer.syncs import count_syncs
from tests.tolerance import assert_close_to_scale


class Hashed:
    """A scripted decoder whose next-token log-probs depend on the whole prefix (through a
    hash of it) and come from a random table: sharp or flat rows, ties, from none to most
    tokens impossible. Pure tensor operations, so it makes no host sync of its own;
    ``reorder`` must follow the beams for the distributions to stay right."""

    def __init__(self, seed: int, vocab: int, rows: int, buckets: int = 61):
        g = torch.Generator().manual_seed(seed)
        sharpness = torch.rand(buckets, 1, generator=g) * 6
        logits = (torch.randn(buckets, vocab, generator=g) * sharpness).round()  # ties too
        share = torch.rand(buckets, 1, generator=g).sqrt()  # of the impossible tokens in a row
        impossible = torch.rand(buckets, vocab, generator=g) < share
        logits[impossible] = float("-inf")
        logits[:, PAD] = float("-inf")
        logits[:, EOS] = logits[:, EOS].nan_to_num(neginf=-3.0)  # every row can end
        self.table, self.buckets = logits.log_softmax(-1), buckets
        self.hash = torch.zeros(rows, dtype=torch.long)
        self.steps = 0

    def step(self, last: torch.Tensor) -> torch.Tensor:
        self.steps += 1
        self.hash = (self.hash * 31 + last[:, 0] + 7) % self.buckets
        return self.table[self.hash]

    def reorder(self, index: torch.Tensor) -> None:
        self.hash = self.hash[index]


def same(got, want):
    """The same n-best lists: tokens, scores and log-probabilities bit for bit, in order."""
    assert [[(h.tokens, h.score, h.log_prob) for h in hs] for hs in got] == [
        [(h.tokens, h.score, h.log_prob) for h in hs] for hs in want
    ]


SETTINGS = list(
    itertools.product(
        [0.0, 0.6, 1.5, -0.5],  # alpha (< 0: stop at K finished)
        [1, 2, 4],  # beam
        [False, True],  # early_stop
    )
)


@pytest.mark.parametrize(("alpha", "k", "early_stop"), SETTINGS)
def test_beam_search_equals_the_reference_on_random_scripted_decoders(alpha, k, early_stop):
    for seed in range(8):
        vocab, b = 6 + seed % 3 * 5, 1 + seed % 4
        max_len = torch.randint(1, 9, (b,), generator=torch.Generator().manual_seed(seed))
        nbest = 1 + seed % k
        prefix, prefix_lp = None, None
        if seed % 3 == 2:  # hypotheses that begin with given tokens and their log-probability
            prefix = [[4 + (i + j) % (vocab - 4) for j in range(2)] for i in range(b)]
            prefix_lp = -torch.rand(b, dtype=torch.float64)
        options = (alpha, nbest, "cpu", early_stop, BOS, EOS, prefix, prefix_lp)
        runs = []
        for search in (beam_search, reference_beam_search):
            d = Hashed(seed, vocab, b * k)
            runs.append(search(d.step, d.reorder, b, k, max_len, *options))
        same(*runs)


@pytest.fixture(scope="module")
def models():
    """Untrained tiny models: flat distributions, the pad id made now and then."""
    out = []
    for seed, vocab in ((0, 40), (1, 16), (2, 40)):
        torch.manual_seed(seed)
        out.append(build_model(ModelConfig.preset("tiny", vocab_size=vocab)).eval())
    return out


def reference_beam_decode(model, src, beam, alpha, nbest):
    """``beam_decode`` over ``reference_beam_search``: the state checks every token it reads."""
    memory, src_mask = model.encode(src)
    state = model.new_state(src_mask, beams=beam)

    def step(tokens):
        return torch.log_softmax(model.decode(tokens, memory, state=state)[:, -1].float(), -1)

    max_len = model.config.clamp_length((src != PAD).sum(1) + 5)
    reorder = lambda i: state.reorder(i, same_sources=True)  # noqa: E731
    return reference_beam_search(step, reorder, src.size(0), beam, max_len, alpha, nbest)


def test_beam_decode_equals_the_reference_also_where_the_pad_id_is_read(models):
    src = torch.tensor([[5, 6, 7, 8, 9, 10, 11], [9, 10, 0, 0, 0, 0, 0], [4, 4, 5, 6, 0, 0, 0]])
    for model, (alpha, k) in zip(models, [(0.6, 4), (0.0, 3), (1.0, 2)], strict=True):
        with torch.inference_mode():
            want = reference_beam_decode(model, src, k, alpha, nbest=k)
        same(beam_decode(model, src, beam=k, alpha=alpha, nbest=k, max_len_offset=5), want)


def test_beam_search_reads_back_once_per_step():
    k, b = 4, 5
    d = Hashed(3, 12, b * k)
    max_len = torch.tensor([6, 9, 12, 14, 20])
    transfers = []
    with pytest.MonkeyPatch.context() as patch:
        to_host = beam_module.to_host
        patch.setattr(beam_module, "to_host", lambda t: transfers.append(1) or to_host(t))
        with count_syncs() as syncs:
            beam_search(d.step, d.reorder, b, k, max_len, 0.6, 2)
    assert len(transfers) == d.steps > 5
    assert sum(syncs.values()) <= d.steps + 1, syncs  # + the length limits, once


def decoder_steps_and_syncs(model, search):
    """(the decoder's calls, the host syncs counted) while ``search()`` runs."""
    steps = []
    decode = model.decode
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model, "decode", lambda *a, **kw: steps.append(1) or decode(*a, **kw))
        with count_syncs() as syncs:
            search()
    return steps, syncs


def test_beam_decode_reads_back_once_per_step(models):
    model = models[1]
    steps, syncs = decoder_steps_and_syncs(
        model, lambda: beam_decode(model, torch.randint(4, 16, (6, 7)), beam=4, max_len_offset=10)
    )
    # + the limits and the encoder's look at its padding, once per batch
    assert sum(syncs.values()) <= len(steps) + 3, syncs


def compare_greedy(model, src, **options):
    want, want_lp = greedy_search(model, src, check_every=1, **options)
    for every in (2, 3, 8):
        got, got_lp = greedy_search(model, src, check_every=every, **options)
        assert torch.equal(got, want)
        if want_lp is None:
            assert got_lp is None
        else:  # rows leave the batch at other steps: float32 rounding of the batch's products
            assert_close_to_scale(got_lp, want_lp, 1e-6)
    return want


def test_greedy_looking_every_few_steps_makes_the_same_outputs(models):
    g = torch.Generator().manual_seed(0)
    for model in models:
        v = model.config.vocab_size
        src = torch.randint(4, v, (9, 7), generator=g)
        src[3:, 5:], src[6:, 2:] = PAD, PAD
        compare_greedy(model, src, max_len_offset=5)
        compare_greedy(model, src, max_len_offset=5, scores=False)
        compare_greedy(model, src, max_len=4)
        prefix = torch.randint(4, v, (9, 2), generator=g)
        compare_greedy(model, src, max_len_offset=5, prefix=prefix)


class PadAt:
    """A model that makes the pad id its best token for one row at one step, and reads it
    back at the next: the state masks it from then on (``DecoderState.advance``)."""

    def __init__(self, model, row: int, at: int):
        self.model, self.config, self.row, self.at = model, model.config, row, at

    def eval(self):
        return self

    def encode(self, src):
        return self.model.encode(src)

    def new_state(self, src_mask):
        self.calls = 0
        return self.model.new_state(src_mask)

    def decode(self, tokens, memory, state, select=None):
        logits = self.model.decode(tokens, memory, state=state, select=select)
        self.calls += 1
        if self.calls == self.at and select is None:
            logits[self.row, -1, PAD] = 1e4
        return logits


def test_greedy_reading_the_pad_id_back_is_the_search_that_looks_every_step(models):
    src = torch.tensor([[5, 6, 7, 8, 9, 10, 11], [9, 10, 12, 0, 0, 0, 0]])
    model = PadAt(models[0], row=1, at=3)
    want, want_lp = greedy_search(model, src, check_every=1, max_len_offset=4)
    assert want[1, 2] == PAD
    got, got_lp = greedy_search(model, src, check_every=4, max_len_offset=4)
    assert torch.equal(got, want) and torch.equal(got_lp, want_lp)


def test_greedy_looks_at_its_rows_every_few_steps(models):
    model = models[1]
    steps, syncs = decoder_steps_and_syncs(
        model,
        lambda: greedy_search(
            model,
            torch.randint(4, 16, (6, 7), generator=torch.Generator().manual_seed(0)),
            max_len_offset=40,
            check_every=8,
        ),
    )
    assert len(steps) > 40
    # a look per 8 steps, + the limit, the output's width and the encoder's look at padding
    assert sum(syncs.values()) <= len(steps) // 8 + 4, syncs


def test_greedy_on_the_shipped_model_looking_every_8_steps(shipped_copy):
    tr = aiayn.load(shipped_copy)
    lines = gzip.decompress((REPO_ROOT / "data/ding-de-en/test.de.gz").read_bytes())
    ids, _ = source_ids(tr.model, tr.tokenizer, lines.decode().splitlines()[:48])
    src = torch.nn.utils.rnn.pad_sequence([torch.tensor(x) for x in ids], batch_first=True)
    out = compare_greedy(tr.model, src)
    compare_greedy(tr.model, src, prefix=out[:, :2])
