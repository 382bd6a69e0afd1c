"""Glossaries read from JSON and TSV (bad ones named by file, line and field), terms found on
word boundaries, placeholders found in text and cut into pieces that decode to them."""

import json

import pytest

from aiayn.data.terminology import PLACEHOLDERS, Glossary, GlossaryError, Terms, placeholders


def test_json_in_libretranslates_layout(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"de_en": {"Schraube": "bolt"}, "en_de": {"bolt": "Schraube"}}))
    g = Glossary.read(path)
    assert g.terms("de", "en").targets == {"schraube": "bolt"}
    assert g.terms("EN", "de").targets == {"bolt": "Schraube"}


def test_tsv_with_a_language_header_gives_every_pair(tmp_path):
    path = tmp_path / "g.tsv"
    path.write_text("# terms\nde\ten\tfr\nSchraube\tbolt\tboulon\n\nMutter\tnut\técrou\n")
    g = Glossary.read(path)
    assert g.terms("de", "en").targets == {"schraube": "bolt", "mutter": "nut"}
    assert g.terms("fr", "de").targets["boulon"] == "Schraube"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("g.json", '{"de_en": {"a": "b",}}', r"g\.json: line 1, column 21: not JSON"),
        ("g.json", '{"german": {"a": "b"}}', r'g\.json: "german": a language pair is written'),
        ("g.json", '{"de_en": ["a"]}', r'g\.json: "de_en": must be an object of terms'),
        ("g.json", '{"de_en": {"Schraube": 3}}', r'g\.json: "de_en" -> "Schraube": a term must'),
        ("g.json", '{"de_en": {"Schraube": " "}}', r'"de_en" -> "Schraube": a term must be a non'),
        ("g.json", '["de_en"]', r"g\.json: must be an object of language pairs"),
        ("g.tsv", "Schraube\tbolt\n", r"g\.tsv: line 1: the first line names the languages"),
        ("g.tsv", "de\ten\nSchraube\tbolt\nMutter\n", r"g\.tsv: line 3: 1 columns; the first"),
        ("g.tsv", "de\ten\nSchraube\t\n", r"g\.tsv: line 2, column 2: a term must be"),
        ("g.tsv", "# nothing\n", r"g\.tsv: no terms"),
    ],
)
def test_a_malformed_glossary_is_an_error_naming_file_line_and_field(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(GlossaryError, match=message):
        Glossary.read(path)


def test_an_unknown_pair_or_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(GlossaryError, match=r"g\.json: no such glossary file"):
        Glossary.read(tmp_path / "g.json")
    (tmp_path / "g.json").write_text('{"de_en": {"a": "b"}}')
    with pytest.raises(GlossaryError, match=r"g\.json: no terms for fr_en .* it has: de_en"):
        Glossary.read(tmp_path / "g.json").terms("fr", "en")


def test_terms_match_ignoring_case_on_word_boundaries_longest_first():
    terms = Terms({"Land": "country", "See": "lake", "New York": "NY", "New York City": "NYC"})
    found = terms.find("Die Schweiz ist ein LAND, seems Switzerland; new york city und New York.")
    assert [(m.source, m.target) for m in found] == [
        ("LAND", "country"),
        ("new york city", "NYC"),
        ("New York", "NY"),
    ]
    assert terms.find("Landes Seen Seestern") == []


def test_placeholders_of_each_kind_and_none_in_prose():
    text = "Hi %s, %(name)s has {0} of {count} items in $HOME/${DIR}<br/> at 50 % off, 100%."
    assert [m.source for m in placeholders(text)] == [
        "%s", "%(name)s", "{0}", "{count}", "$HOME", "${DIR}", "<br/>",
    ]  # fmt: skip
    prose = "Er zahlt 5 $ und 10 % der Summe, {} mal."
    assert [m.source for m in placeholders(prose)] == ["{}"]
    extended = [*PLACEHOLDERS, r"@\w+"]
    assert [m.source for m in placeholders("an @alice und %d", extended)] == ["@alice", "%d"]
