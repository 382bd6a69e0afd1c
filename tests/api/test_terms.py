"""``Translator.translate`` with a glossary, constraints and kept placeholders: a tiny random
model, so that what holds the terms is the search, not the model."""

import pytest
import torch

import aiayn
from aiayn.api.terms import Held, constraint_ids
from aiayn.data.terminology import GlossaryError
from aiayn.errors import OptionError
from aiayn.infer.sampling import Sampling

TEXTS = ["Die Schraube ist locker.", "Das Haus ist alt.", "Wo ist die Schraube und die Mutter?"]
GLOSSARY = {"de_en": {"Schraube": "bolt", "Mutter": "nut"}}


@pytest.fixture(scope="module")
def translator(model_dirs):
    return aiayn.load(model_dirs["translator"])


def test_every_glossary_term_found_is_in_the_translation(translator):
    plain = translator.translate(TEXTS, beam=2)
    got = translator.translate(TEXTS, beam=2, glossary=GLOSSARY)
    assert "bolt" in got[0].text and got[0].unmet == ()
    assert "bolt" in got[2].text and "nut" in got[2].text
    assert got[1].tokens == plain[1].tokens  # no term: as without the glossary
    assert got[0].text != plain[0].text


@pytest.mark.parametrize(
    "options", [{}, {"sampling": Sampling(seed=1)}, {"beam": 3, "nbest": 2}], ids=str
)
def test_greedy_sampling_and_nbest_requests_hold_the_terms(translator, options):
    for t in translator.translate(TEXTS[:1], glossary={"Schraube": "bolt"}, **options):
        assert "bolt" in t.text
        assert all(("bolt" in h.text) != (h.unmet == ("bolt",)) for h in t.hypotheses)


def test_constraints_given_outright_and_their_tokens_decode_to_them(translator):
    got = translator.translate(["Guten Morgen."], beam=2, constraints=[["sunshine", "42"]])[0]
    assert "sunshine" in got.text and "42" in got.text
    tok = translator.tokenizer
    for text in ["sunshine", "%s", "{name}", "<x/>"]:
        for attached in (False, True):
            assert tok.decode(constraint_ids(tok, [Held(text, attached)]))[0] == text


def test_a_prefix_and_a_glossary_together(translator):
    got = translator.translate(TEXTS[:1], beam=2, prefix=["So"], glossary={"Schraube": "bolt"})
    assert got[0].text.startswith("So") and "bolt" in got[0].text[2:]


def test_placeholders_are_kept_verbatim(translator):
    texts = ["Datei %s gelöscht.", "Hallo {name}, du hast {0} Nachrichten.", "Klick <x/>(%d)."]
    got = translator.translate(texts, beam=2, keep=aiayn.PLACEHOLDERS)
    for src, t in zip(texts, got, strict=True):
        for span in aiayn.data.terminology.placeholders(src):
            assert span.source in t.text, (src, t.text)


def test_what_the_length_limit_cut_off_is_named(translator):
    got = translator.translate(["Ja."], constraints=[["word " * 10]], max_len_offset=0)[0]
    assert got.unmet == ("word word word word word word word word word word",)


def test_bad_glossaries_and_constraints_are_errors(translator, tmp_path):
    with pytest.raises(GlossaryError, match="no terms for de_en"):
        translator.translate(TEXTS, glossary={"fr_en": {"vis": "bolt"}})
    with pytest.raises(GlossaryError, match="no such glossary file"):
        translator.translate(TEXTS, glossary=tmp_path / "missing.json")
    with pytest.raises(OptionError, match="one list of target strings per text"):
        translator.translate(TEXTS, constraints=[["a"]])
    with pytest.raises(OptionError, match=r"constraints\[0\]: a list of non-empty strings"):
        translator.translate(TEXTS[:1], constraints=["bolt"])
    with pytest.raises(aiayn.errors.UserError, match="not a regular expression"):
        translator.translate(TEXTS[:1], keep=["(unclosed"])


class NoConstraints:
    """A decoding engine without constrained search (as CTranslate2): it decodes plainly with
    the torch model and counts its calls."""

    name = "ctranslate2"

    def __init__(self, model):
        self.model, self.config, self.calls = model, model.config, 0

    def search(self, src, *args, **kwargs):
        from aiayn.infer.translate import search

        self.calls += 1
        return search(self.model, src, *args, **kwargs)


def test_an_engine_without_constraints_fails_or_falls_back_to_torch(translator):
    engine = NoConstraints(translator.model)
    forced = aiayn.Translator(translator.model, translator.tokenizer, run=translator.run,
                              decoder=engine)  # fmt: skip
    with pytest.raises(OptionError, match="engine 'torch'.*engine 'auto'") as e:
        forced.translate(TEXTS, glossary=GLOSSARY)
    assert set(e.value.options) == {"engine", "glossary"}
    assert forced.translate(TEXTS[1:2], glossary=GLOSSARY)[0].text  # no term: the engine's
    assert engine.calls == 1
    auto = aiayn.Translator(translator.model, translator.tokenizer, run=translator.run)
    auto.auto, auto._make_fast = True, lambda: engine  # as from_dir(engine="auto") makes it
    got = auto.translate(TEXTS, glossary=GLOSSARY, scores=False)  # greedy: the engine's kind
    assert "bolt" in got[0].text and engine.calls == 1  # a request with terms: torch's
    assert got[1].text == translator.translate(TEXTS[1:2], scores=False)[0].text
    auto.translate(TEXTS[1:2], scores=False)
    assert engine.calls == 2  # without terms: the engine's
    assert torch.is_tensor(next(translator.model.parameters()))


def test_decomposed_text_translates_as_composed_and_finds_its_terms(translator):
    """An "ä" written as "a" + U+0308 (NFD, as macOS writes file names) is read as "ä": it
    went to the model as other pieces (another translation) and no term matched it."""
    nfc, nfd = "Die Bäckerei ist zu.", "Die Ba\u0308ckerei ist zu."
    assert translator.translate([nfd])[0].tokens == translator.translate([nfc])[0].tokens
    for text in (nfc, nfd):
        got = translator.translate([text], glossary={"Bäckerei": "bakery"})[0]
        assert "bakery" in got.text and got.unmet == ()


def test_a_kept_span_comes_back_as_written_even_decomposed(translator):
    got = translator.translate(["Hallo {Zoe\u0308}."], keep=[r"\{[^{}]*\}"])[0]
    assert "{Zoe\u0308}" in got.text and got.unmet == ()


def test_a_term_inside_a_kept_span_asks_for_no_target():
    """A word in a kept span ("Name" in "{Name}", "Haus" in a URL) is not translated: its
    target was forced into the translation beside the span ("Keep {Name} label.")."""
    from aiayn.api.terms import text_constraints
    from aiayn.data.terminology import Terms

    terms = Terms({"Name": "label", "Haus": "building"})
    texts = ["Hallo {Name}, dein Name.", "Siehe https://example.com/Haus, ein Ha\u0308us."]
    held = text_constraints(texts, terms, None, aiayn.PLACEHOLDERS)
    assert held == [
        [Held("label"), Held("{Name}")],
        [Held("https://example.com/Haus")],
    ]


def test_a_term_the_prefix_holds_is_not_placed_again():
    """The search places constraints after the prefix: "The bolt" as the prefix of a text
    with "Schraube" -> "bolt" gave "The bolt is bolt."."""
    from aiayn.api.terms import less_prefix

    wanted = [[Held("bolt"), Held("bolt"), Held("%s", True)], [Held("bolt")], [Held("bolt")]]
    prefixes = ["The bolt", "", "The bolted"]
    assert less_prefix(wanted, prefixes) == [
        [Held("bolt"), Held("%s", True)],
        [Held("bolt")],
        [Held("bolt")],
    ]


def test_a_prefix_holding_every_term_decodes_as_without_them(translator):
    got = translator.translate(TEXTS[:1], beam=2, prefix=["The bolt"], glossary=GLOSSARY)[0]
    plain = translator.translate(TEXTS[:1], beam=2, prefix=["The bolt"])[0]
    assert got.tokens == plain.tokens and got.unmet == ()


def test_a_placeholders_pieces_are_banned_outside_it_where_the_text_has_none(translator):
    """A stray "%" or "<" the model wrote beside the kept "%s" or "<x/>" ("Date %%%s",
    "Capters < <x/>.") is banned; a "%" the text has outside a placeholder stays free."""
    from aiayn.api.terms import stray_sigils
    from aiayn.infer.translate import sigil_tokens

    assert stray_sigils("Datei %s gelöscht.", [Held("%s", False)]) == {"%"}
    assert stray_sigils("50 % von %s", [Held("%s", False)]) == set()
    assert stray_sigils("Ein <x/> da", [Held("<x/>", False)]) == {"<", ">"}
    assert stray_sigils("Die Schraube", [Held("bolt")]) == set()
    tok = translator.tokenizer
    sigils = sigil_tokens(tok)
    (percent,) = [t for t in tok.encode(["%"])[0] if tok.id_to_piece(t) != "\u2581"]
    assert percent in sigils["%"]
    specials = {translator.config.bos_id, translator.config.eos_id, translator.config.pad_id}
    assert not specials & (sigils["<"] | sigils[">"])
