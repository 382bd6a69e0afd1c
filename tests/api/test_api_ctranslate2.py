"""``aiayn.load(path, engine="ctranslate2")``: a Translator that decodes with CTranslate2 and
answers as the torch engine's does; ``score`` and ``attention`` stay the torch model's."""

import pytest
import torch

import aiayn
from aiayn.api import load_for
from aiayn.errors import OptionError, UserError
from aiayn.interop.ctranslate2 import CTranslate2Engine
from tests.tolerance import assert_close_to_scale

pytest.importorskip("ctranslate2", reason="CTranslate2 is not installed (aiayn[ctranslate2])")
pytest.importorskip("transformers", reason="CTranslate2's converter needs transformers")

LINES = ["Guten Morgen.", "Wie geht es dir?", "Das Buch liegt auf dem Tisch.", "Ja."]


@pytest.fixture(scope="module")
def engines(shipped_copy):
    """(torch Translator, ctranslate2 Translator) of one copy of the shipped model."""
    return aiayn.load(shipped_copy, engine="torch"), aiayn.load(shipped_copy, engine="ctranslate2")


def _scores(translations) -> torch.Tensor:
    return torch.tensor([t.score for t in translations], dtype=torch.float64)


def test_the_engine_is_a_translator_that_decodes_with_ctranslate2(engines):
    torch_tr, ct2_tr = engines
    assert isinstance(ct2_tr, aiayn.Translator)
    assert (torch_tr.engine, ct2_tr.engine) == ("torch", "ctranslate2")
    assert isinstance(ct2_tr.decoder, CTranslate2Engine) and torch_tr.decoder is torch_tr.model
    assert ct2_tr.languages == torch_tr.languages and ct2_tr.config == torch_tr.config


def test_greedy_gives_the_torch_engines_texts_tokens_and_scores(engines):
    torch_tr, ct2_tr = engines
    want, got = torch_tr.translate(LINES), ct2_tr.translate(LINES)
    assert [t.text for t in got] == [t.text for t in want]
    assert [t.tokens for t in got] == [t.tokens for t in want]
    assert_close_to_scale(_scores(got), _scores(want))
    assert not any(t.truncated for t in got)


def test_beam_at_length_penalty_0_gives_the_torch_engines_best(engines):
    torch_tr, ct2_tr = engines
    options = dict(beam=4, nbest=2, lenpen=0.0)
    want, got = torch_tr.translate(LINES, **options), ct2_tr.translate(LINES, **options)
    assert [t.text for t in got] == [t.text for t in want]
    assert all(len(t.hypotheses) == 2 for t in got)
    assert_close_to_scale(_scores(got), _scores(want))


def test_seeded_samples_repeat_and_are_scored_under_the_model(engines):
    torch_tr, ct2_tr = engines
    sampling = aiayn.Sampling(temperature=1.5, top_k=20, seed=3)
    first = ct2_tr.translate(LINES, nbest=2, sampling=sampling)
    again = ct2_tr.translate(LINES, nbest=2, sampling=sampling)
    assert [[h.tokens for h in t.hypotheses] for t in first] == [
        [h.tokens for h in t.hypotheses] for t in again
    ]
    texts = [h.text for t in first for h in t.hypotheses]
    sources = [line for line, t in zip(LINES, first, strict=True) for _ in t.hypotheses]
    got = torch.tensor([h.log_prob for t in first for h in t.hypotheses], dtype=torch.float64)
    assert_close_to_scale(got, torch.tensor(torch_tr.score(sources, texts), dtype=torch.float64))
    unseeded = ct2_tr.translate(LINES, sampling=aiayn.Sampling(seed=None))
    assert len(unseeded) == len(LINES)


def _samples(translator, nbest=2, **settings) -> list[list[tuple[int, ...]]]:
    out = translator.translate(LINES, nbest=nbest, sampling=aiayn.Sampling(**settings))
    return [[tuple(h.tokens) for h in t.hypotheses] for t in out]


def test_settings_ctranslate2_takes_otherwise_have_the_torch_engines_meaning(engines):
    """Greedy (temperature 0, top-k 1, a top-p below float32's range, a temperature below
    2**-100) gives both engines' greedy output nbest times; a top-k of the whole vocabulary
    (but the padding token, which neither engine draws) or more is no top-k filter; a
    temperature past float32's largest number is 2**100."""
    torch_tr, _ = engines
    greedy = [[tuple(t.tokens)] * 2 for t in torch_tr.translate(LINES)]
    for settings in (
        dict(temperature=0.0),
        dict(top_k=1),
        dict(top_p=5e-324),  # float32 0
        dict(top_p=1e-300),
        dict(top_p=1e-45),  # float32's smallest subnormal number
        dict(temperature=1e-300),
        dict(temperature=1e-40),  # CTranslate2 drew nonsense
    ):
        for seed in (0, 3):
            for translator in engines:
                got = _samples(translator, **settings, seed=seed)
                assert got == greedy, (translator.engine, settings, seed)
    vocabulary = torch_tr.config.vocab_size
    for translator in engines:
        unfiltered = _samples(translator, temperature=1.5, seed=3)
        assert len({h for hyps in unfiltered for h in hyps}) > len(LINES)  # really drawn
        for top_k in (vocabulary - 1, vocabulary, 10**6, 2**70):
            assert _samples(translator, temperature=1.5, top_k=top_k, seed=3) == unfiltered
        flat = _samples(translator, nbest=1, temperature=2.0**100, seed=3)
        assert _samples(translator, nbest=1, temperature=1e300, seed=3) == flat


def test_a_seed_ctranslate2_cannot_take_is_an_option_error(engines):
    _, ct2_tr = engines
    assert len(_samples(ct2_tr, seed=2**32 - 1)) == len(LINES)
    with pytest.raises(OptionError) as caught:
        ct2_tr.translate(LINES, sampling=aiayn.Sampling(seed=2**32))
    assert str(caught.value) == (
        "seed must be an integer in [0, 4294967295] with engine ctranslate2 (CTranslate2's "
        "random generator takes 32 bits), got 4294967296"
    )
    assert caught.value.options == ("seed", "engine")


def test_score_and_attention_run_the_torch_model(engines):
    torch_tr, ct2_tr = engines
    targets = ["Good morning.", "How are you?", "The book is on the table.", "Yes."]
    assert ct2_tr.score(LINES, targets) == torch_tr.score(LINES, targets)
    got, want = ct2_tr.attention(LINES[0]), torch_tr.attention(LINES[0])
    assert (got.output, got.translation) == (want.output, want.translation)


def test_options_are_checked_as_for_the_torch_engine(engines):
    _, ct2_tr = engines
    with pytest.raises(OptionError, match=r"nbest \(3\) cannot exceed beam \(2\)"):
        ct2_tr.translate(LINES, beam=2, nbest=3)
    with pytest.raises(OptionError, match="texts must be a list of strings"):
        ct2_tr.translate("Guten Morgen.")


def test_the_engine_is_for_translators_only(model_dirs, shipped_copy):
    for family in ("lm", "classifier"):
        with pytest.raises(UserError, match="the ctranslate2 engine translates with encoder-dec"):
            aiayn.load(model_dirs[family], engine="ctranslate2")
    with pytest.raises(UserError, match="generate"):  # the family check comes first
        load_for("generate", shipped_copy, engine="ctranslate2")
    with pytest.raises(UserError, match="engine 'onnx': choose one of auto, torch, ctranslate2"):
        aiayn.load(shipped_copy, engine="onnx")
    with pytest.raises(UserError, match="device 'mps': choose auto, cpu, cuda or cuda:N"):
        aiayn.load(shipped_copy, engine="ctranslate2", device="mps")


def test_decoders_give_ctranslate2_as_many_and_must_be_a_positive_integer(shipped_copy):
    translator = aiayn.load(shipped_copy, engine="ctranslate2", decoders=3)
    assert translator.decoder.translator.num_translators == 3
    one = aiayn.load(shipped_copy, engine="ctranslate2")
    texts = [t.text for t in translator.translate(LINES, beam=4)]  # alone: on every thread
    assert texts == [t.text for t in one.translate(LINES, beam=4)]
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(OptionError, match="decoders must be an integer >= 1"):
            aiayn.load(shipped_copy, decoders=bad)
