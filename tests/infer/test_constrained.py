"""Lexically constrained beam search against scripted decoders: with no constraints it is the
plain search bit for bit; with constraints every output holds them, or says which it lacks."""

import itertools
import math

import pytest
import torch

from aiayn.data.tokenizer import BOS, EOS
from aiayn.infer import beam as beam_module
from aiayn.infer.beam import beam_decode, beam_search
from aiayn.infer.constrained import START, Constraints, constrained_beam_search, constrained_decode
from tests.infer.syncs import count_syncs
from tests.infer.test_beam import A, B, C, Scripted, _trained_copy_model  # noqa: F401
from tests.infer.test_host_syncs import SETTINGS, Hashed, same
from tests.tolerance import assert_close_to_scale

D = 7


def holds(tokens, seq) -> bool:
    seq = list(seq)
    return any(tokens[i : i + len(seq)] == seq for i in range(len(tokens) - len(seq) + 1))


def run(table, constraints, beam=3, alpha=0.0, max_len=10, nbest=1):
    s = Scripted(table, len(constraints), beam)
    return constrained_beam_search(
        s.step, s.reorder, len(constraints), beam, torch.tensor(max_len), constraints, alpha, nbest
    )


def test_moves_through_shared_prefixes_repeats_and_restarts():
    cons = Constraints([[A, B], [A, C], [D]])
    s = cons.move(START, A)
    assert cons.bank(s) == 1 and set(cons.wanted(s)) == {A, B, C, D}
    s = cons.move(s, C)  # [A, C] met
    assert cons.unmet(s) == (0, 2) and cons.bank(s) == 2
    s = cons.move(cons.move(s, A), A)  # A A: the second A begins [A, B] afresh
    assert cons.bank(s) == 3
    s = cons.move(s, B)
    assert cons.unmet(s) == (2,)
    twice = Constraints([[A], [A]])  # two equal constraints: two to meet
    assert twice.unmet(twice.move(START, A)) == (1,)
    assert twice.unmet(twice.move(twice.move(START, A), A)) == ()
    # fallen out after A A, the last A A begins A A B again (KMP's failure link)
    kmp = Constraints([[A, A, B]])
    s = START
    for t in (A, A, A, B):
        s = kmp.move(s, t)
    assert kmp.unmet(s) == ()


def test_a_constraint_is_a_whole_word():
    # "bolt" then "ed" (B, in the word) is "bolted", which does not hold the word "bolt"
    cons = Constraints([[A]], inword=frozenset([B]))
    assert cons.unmet(cons.move(START, A)) == ()
    assert cons.unmet(cons.move(cons.move(START, A), B)) == (0,)
    assert cons.unmet(cons.move(cons.move(START, A), C)) == ()
    table = {(): {A: 0.5, C: 0.5}, (A,): {B: 0.8, C: 0.2}, (A, C): {EOS: 1.0}}
    table[(A, B)] = {EOS: 1.0}
    s = Scripted(table, 1, 2)
    args = (s.step, s.reorder, 1, 2, torch.tensor(5), [[[A]]], 0.0)
    assert constrained_beam_search(*args)[0][0].tokens == [A, B, EOS]
    s = Scripted(table, 1, 2)
    args = (s.step, s.reorder, 1, 2, torch.tensor(5), [[[A]]], 0.0)
    assert constrained_beam_search(*args, inword=frozenset([B]))[0][0].tokens == [A, C, EOS]


TABLE = {
    (): {A: 0.7, B: 0.3},
    (A,): {EOS: 0.9, C: 0.1},
    (B,): {EOS: 0.6, C: 0.4},
    (A, C): {EOS: 1.0},
    (B, C): {EOS: 1.0},
}


def test_a_constraint_is_placed_where_the_model_likes_it_best():
    assert run(TABLE, [[]])[0][0].tokens == [A, EOS]
    best = run(TABLE, [[[C]]])[0][0]
    # A C eos: .07, B C eos: .12; either holds C, the second is likelier
    assert best.tokens == [B, C, EOS] and best.unmet == ()
    assert_close_to_scale(best.log_prob, math.log(0.12))


def test_a_constraint_the_model_never_offers_still_appears():
    # D is not among the scripted tokens: -1e9 everywhere, yet constrained it is placed
    best = run(TABLE, [[[D, A]]], beam=2)[0][0]
    assert holds(best.tokens, [D, A]) and best.tokens[-1] == EOS and best.unmet == ()


def test_two_constraints_in_either_order():
    table = {(): {A: 0.5, B: 0.5}, (A,): {B: 0.6, C: 0.4}, (A, B): {C: 0.9, EOS: 0.1}}
    table[(A, B, C)] = {EOS: 1.0}
    best = run(table, [[[C], [B]]], beam=4)[0][0]
    assert best.tokens == [A, B, C, EOS]
    best = run(table, [[[C], [A, B]]], beam=4)[0][0]
    assert best.tokens == [A, B, C, EOS]


def test_at_the_length_limit_the_result_names_what_it_lacks():
    table = {(A,) * n: {A: 0.9, EOS: 0.1} for n in range(10)}
    out = run(table, [[[B, C], [A]]], beam=3, max_len=2, nbest=3)[0]
    assert (out[0].tokens, out[0].unmet) == ([A, A], (0,))  # [A] held, [B, C] not
    for h in out:
        assert all(not holds(h.tokens, seq) for c, seq in enumerate([[B, C], [A]]) if c in h.unmet)
        assert all(holds(h.tokens, seq) for c, seq in enumerate([[B, C], [A]]) if c not in h.unmet)
    assert [len(h.unmet) for h in out] == sorted(len(h.unmet) for h in out)  # fullest first


@pytest.mark.parametrize(("alpha", "k", "early_stop"), SETTINGS)
def test_no_constraints_is_the_plain_search_bit_for_bit(alpha, k, early_stop):
    for seed in range(4):
        vocab, b = 6 + seed % 3 * 5, 1 + seed % 4
        max_len = torch.randint(1, 9, (b,), generator=torch.Generator().manual_seed(seed))
        options = (alpha, 1 + seed % k, "cpu", early_stop)
        d = Hashed(seed, vocab, b * k)
        want = beam_search(d.step, d.reorder, b, k, max_len, *options)
        for none in (None, [[] for _ in range(b)], [[[]] for _ in range(b)]):
            d = Hashed(seed, vocab, b * k)
            same(constrained_beam_search(d.step, d.reorder, b, k, max_len, none, *options), want)


@pytest.mark.parametrize(("alpha", "k"), list(itertools.product([0.0, 0.6, 1.5], [1, 2, 4])))
def test_constrained_outputs_hold_their_constraints_on_random_decoders(alpha, k):
    met = 0
    for seed in range(6):
        vocab, b = 8 + seed % 3 * 4, 3
        g = torch.Generator().manual_seed(seed)
        max_len = torch.randint(6, 14, (b,), generator=g)
        cons = [
            [torch.randint(4, vocab, (1 + (seed + i + c) % 3,), generator=g).tolist()
             for c in range(i)]
            for i in range(b)
        ]  # fmt: skip
        d = Hashed(seed, vocab, b * k)
        got = constrained_beam_search(d.step, d.reorder, b, k, max_len, cons, alpha, nbest=1)
        plain = beam_search(*_fresh(seed, vocab, b, k), b, k, max_len, alpha)
        assert [h.tokens for h in got[0]] == [h.tokens for h in plain[0]]  # no constraints
        for n_best, seqs in zip(got, cons, strict=True):
            h = n_best[0]
            for c, seq in enumerate(seqs):
                assert holds(h.tokens, seq) or c in h.unmet, (h, seqs)
            met += len(seqs) - len(h.unmet)
            if h.unmet and h.tokens[-1] == EOS:  # ended lacking one: nothing else possible
                assert _choices(seed, vocab, h.tokens[:-1]) == [EOS]
            elif h.unmet:  # else only the length limit ends it
                assert len(h.tokens) == max_len[got.index(n_best)]
            # its score is its log-probability under the decoder
            assert_close_to_scale(h.log_prob, _log_prob(seed, vocab, h.tokens))
    assert met >= 5  # of 18: a random decoder makes many tokens impossible


@pytest.mark.parametrize("k", [1, 2, 4])
def test_where_every_token_is_possible_every_constraint_is_met(k):
    for seed in range(6):
        vocab, b = 8 + seed % 3 * 4, 3
        g = torch.Generator().manual_seed(seed)
        cons = [
            [torch.randint(4, vocab, (1 + (seed + i + c) % 3,), generator=g).tolist()
             for c in range(i)]
            for i in range(b)
        ]  # fmt: skip
        d = Hashed(seed, vocab, b * k)
        d.table = d.table.nan_to_num(neginf=-30.0)  # unlikely, not impossible
        max_len = torch.full((b,), 12)
        got = constrained_beam_search(d.step, d.reorder, b, k, max_len, cons, 0.6)
        for n_best, seqs in zip(got, cons, strict=True):
            assert n_best[0].unmet == ()
            assert all(holds(n_best[0].tokens, seq) for seq in seqs)


def _fresh(seed, vocab, b, k):
    d = Hashed(seed, vocab, b * k)
    return d.step, d.reorder


def _choices(seed, vocab, tokens) -> list[int]:
    """The tokens the decoder makes possible after ``tokens``."""
    d = Hashed(seed, vocab, 1)
    for last in [BOS, *tokens]:
        logp = d.step(torch.tensor([[last]]))[0]
    return torch.isfinite(logp).nonzero().flatten().tolist()


def _log_prob(seed, vocab, tokens) -> float:
    d = Hashed(seed, vocab, 1)
    total, last = 0.0, BOS
    for t in tokens:
        total += float(d.step(torch.tensor([[last]]))[0, t])
        last = t
    return total


def test_one_read_back_per_step():
    k, b = 4, 5
    d = Hashed(3, 12, b * k)
    max_len = torch.tensor([6, 9, 12, 14, 20])
    cons = [[[5]], [[6, 7]], [], [[8], [9, 10]], [[4]]]
    transfers = []
    with pytest.MonkeyPatch.context() as patch:
        to_host = beam_module.to_host
        patch.setattr(beam_module, "to_host", lambda t: transfers.append(1) or to_host(t))
        with count_syncs() as syncs:
            constrained_beam_search(d.step, d.reorder, b, k, max_len, cons, 0.6, 2)
    assert len(transfers) == d.steps > 5
    assert sum(syncs.values()) <= d.steps + 1, syncs  # + the length limits, once


def test_constrained_decode_over_a_model(_trained_copy_model):  # noqa: F811
    trained_copy_model = _trained_copy_model
    src = torch.tensor([[5, 9, 7, 12, 4, 15], [6, 6, 8, 11, 0, 0]])
    plain = beam_decode(trained_copy_model, src, beam=4)
    same(constrained_decode(trained_copy_model, src, [[], []], beam=4), plain)
    got = constrained_decode(trained_copy_model, src, [[[13, 14]], []], beam=4)
    assert holds(got[0][0].tokens, [13, 14]) and got[0][0].unmet == ()
    assert got[1][0].tokens == plain[1][0].tokens  # its batch neighbour unconstrained


@pytest.fixture(scope="module")
def ding():
    """The shipped model and the first test sentences of its corpus, as source ids."""
    import aiayn
    from aiayn.data.files import load_split
    from tests.conftest import REPO_ROOT

    path = REPO_ROOT / "models" / "ding-de-en"
    if not (path / "model.safetensors").is_file():
        pytest.skip("models/ding-de-en is not here")
    tr = aiayn.load(path)
    sources = [de for de, _ in load_split(REPO_ROOT / "data" / "ding-de-en", "test")]
    return tr, sources


def _batches(tr, texts, size):
    from aiayn.data.batching import pad
    from aiayn.infer.translate import source_ids

    ids, _ = source_ids(tr.model, tr.tokenizer, texts)
    for i in range(0, len(ids), size):
        yield pad(ids[i : i + size], tr.config.pad_id)


def _banks_without_constraints(model, src, beam):
    """The constrained search's own selection (``Banks``) with no constraint anywhere."""
    from aiayn.infer.beam import decoder_search
    from aiayn.infer.beam_state import SearchShape, run_search
    from aiayn.infer.constrained import Banks

    d = decoder_search(model, src, beam, 50, None)
    shape = SearchShape(beam, 0.6, False, 0, model.config.eos_id, src.device)
    banks = Banks(shape, [Constraints([]) for _ in range(src.size(0))], frozenset())
    return run_search(d.step, d.reorder, banks, shape, src.size(0), d.max_len, 1, BOS, None,
                      None, d.on_tokens)  # fmt: skip


def test_the_shipped_model_decodes_alike_without_constraints(ding):
    tr, sources = ding
    with torch.inference_mode():
        for src in _batches(tr, sources[:24], 12):
            plain = beam_decode(tr.model, src, beam=4)
            same(constrained_decode(tr.model, src, [[] for _ in range(len(src))], beam=4), plain)
            # the banks' selection itself, with one bank, picks as the plain one does
            same(_banks_without_constraints(tr.model, src, 4), plain)


def test_a_glossary_term_aligns_to_its_source_word(ding):
    tr, _ = ding
    got = tr.translate(["Die Schraube ist locker."], beam=4, glossary={"Schraube": "bolt"},
                       alignment=True)[0]  # fmt: skip
    words = got.text.split()
    assert "bolt" in words and (1, words.index("bolt")) in got.alignment


@pytest.mark.slow
def test_the_shipped_model_decodes_alike_without_constraints_on_the_whole_test_set(ding):
    tr, sources = ding
    with torch.inference_mode():
        for src in _batches(tr, sources, 50):
            same(_banks_without_constraints(tr.model, src, 4), beam_decode(tr.model, src, beam=4))


def test_a_banned_token_stands_only_inside_its_constraint():
    """C D is a placeholder ("<" "x/>"): with C banned, the model's favourite, a stray C
    before the placeholder ("< <x/>"), and a C that leaves the placeholder half written are
    not written; without the ban they are."""
    table = {
        (): {C: 0.6, A: 0.4},
        (C,): {A: 0.9, D: 0.1},
        (C, A): {C: 0.5, EOS: 0.5},
        (C, A, C): {D: 1.0},
        (A,): {C: 0.6, EOS: 0.4},
        (A, C): {D: 0.9, A: 0.1},
    }

    def best(banned, nbest=1):
        s = Scripted(table, 1, 3)
        args = (s.step, s.reorder, 1, 3, torch.tensor(6), [[[C, D]]], 0.0, nbest)
        return constrained_beam_search(*args, banned=banned)[0]

    assert best(None)[0].tokens == [C, A, C, D, EOS]  # .6 * .9 * .5
    assert best([frozenset()])[0].tokens == [C, A, C, D, EOS]
    hyps = best([frozenset([C])], nbest=2)
    assert hyps[0].tokens == [A, C, D, EOS]  # .4 * .6 * .9
    assert all(h.tokens.count(C) == 1 and holds(h.tokens, [C, D]) for h in hyps)
