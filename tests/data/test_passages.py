"""Plain texts cut into lines and sentences, and joined back from their translations."""

import time

import pytest

from aiayn.data.passages import Passages


def test_lines_and_sentences_round_trip_with_their_white_space():
    texts = ["  Heute. Nein.\r\n\n\tGut!  \n", "", "Eins", "42\nHallo Welt."]
    p = Passages(texts, fits=lambda t: True, translatable=lambda line: not line.isdigit())
    assert p.texts == ["Heute.", "Nein.", "Gut!", "Eins", "Hallo Welt."]
    assert p.first == [True, False, False, True, True]
    assert p.passage == [0, 0, 0, 2, 3]  # each sentence's passage (text 1 has none)
    assert p.join([t.upper() for t in p.texts]) == [
        "  HEUTE. NEIN.\r\n\n\tGUT!  \n",
        "",
        "EINS",
        "42\nHALLO WELT.",
    ]
    with pytest.raises(ValueError, match="4 translations for 5 texts"):
        p.join(["x"] * 4)


def test_a_sentence_too_long_for_the_model_is_cut_where_it_still_fits():
    p = Passages(["a b c d e."], fits=lambda t: len(t.split()) <= 2)
    assert p.texts == ["a b", "c d", "e."]
    assert p.join(["1", "", "3 "]) == ["1 3"]  # an empty translation leaves no double space


def test_a_line_is_cut_in_time_in_proportion_to_its_length():
    """Shapes a client may send in one text (LibreTranslate's /translate cuts them on the
    server's event loop): white space inside a long line, a word full of full stops, and
    thousands of lines after thousands of blank ones. Each took seconds (the time grew with
    the square of the text); a twentieth of that is the bar."""
    shapes = {
        "a" + " \t" * 30_000 + "b": 1,
        "." * 60_000 + " a": 1,
        "\n" * 40_000 + "a\n" * 20_000: 20_000,
    }
    for text, sentences in shapes.items():
        start = time.perf_counter()
        p = Passages([text], fits=lambda t: True)
        assert time.perf_counter() - start < 2, repr(text[:10])
        assert len(p.texts) == sentences and p.first[1:] == [False] * (sentences - 1)


def test_leading_white_space_of_any_kind_is_kept():
    p = Passages(["\u3000Hallo.\u00a0\n\u00a0 Welt"], fits=lambda t: True)
    assert p.texts == ["Hallo.", "Welt"]
    assert p.join(["Hello.", "World"]) == ["\u3000Hello.\u00a0\n\u00a0 World"]


def test_a_kept_span_is_not_cut_where_it_fits_whole():
    """A cut at its "!" or where the model's length ran out left the span whole in neither
    sentence, so neither kept it."""
    from aiayn.data.terminology import PLACEHOLDERS

    text = "Bitte {% trans 'Hallo!' %} lesen. x{{ a b }}y {{c}} z"
    p = Passages([text], fits=lambda t: len(t.split()) <= 4, keep=PLACEHOLDERS)
    assert p.texts == ["Bitte", "{% trans 'Hallo!' %}", "lesen.", "x{{ a b }}y", "{{c}} z"]
    assert Passages([text], fits=lambda t: True, keep=PLACEHOLDERS).texts == [
        "Bitte {% trans 'Hallo!' %} lesen.",
        "x{{ a b }}y {{c}} z",
    ]


def test_a_models_own_splitter_says_where_sentences_end():
    """An Argos Translate package's splitter (here one that ends a sentence after "z.B." and
    nowhere else) replaces aiayn's cuts; one whose sentences are not the line's words (it
    cut inside a word) leaves aiayn's; a sentence still too long is cut where it fits."""
    from aiayn.data.passages import sentence_ends

    def after_zb(text: str) -> list[str]:
        head, _, rest = text.partition("z.B. ")
        return [head + "z.B.", rest] if rest else [text]

    p = Passages(["Nimm z.B. das. Oder das."], fits=lambda t: True, split=after_zb)
    assert p.texts == ["Nimm z.B.", "das. Oder das."]
    p = Passages(["Nimm z.B. a b c d."], fits=lambda t: len(t.split()) <= 2, split=after_zb)
    assert p.texts == ["Nimm z.B.", "a b", "c d."]
    words = "Eins. Zwei drei.".split()
    assert sentence_ends(words, ["Eins.", "Zwei drei."]) == [1]
    assert sentence_ends(words, ["Ei", "ns. Zwei drei."]) is None
    p = Passages(["Eins. Zwei drei."], fits=lambda t: True, split=lambda t: ["Ei", t[2:]])
    assert p.texts == ["Eins.", "Zwei drei."]  # aiayn's own cuts


def test_white_space_inside_a_translation_is_kept_its_line_breaks_made_spaces():
    p = Passages(["Eins. Zwei."], fits=lambda t: True)
    assert p.join(["a  b", "c\nd "]) == ["a  b c d"]
