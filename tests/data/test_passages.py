"""Plain texts cut into lines and sentences, and joined back from their translations."""

import pytest

from aiayn.data.passages import Passages


def test_lines_and_sentences_round_trip_with_their_white_space():
    texts = ["  Heute. Nein.\r\n\n\tGut!  \n", "", "Eins", "42\nHallo Welt."]
    p = Passages(texts, fits=lambda t: True, translatable=lambda line: not line.isdigit())
    assert p.texts == ["Heute.", "Nein.", "Gut!", "Eins", "Hallo Welt."]
    assert p.first == [True, False, False, True, True]
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
