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


def test_a_percent_sign_and_many_zeros_are_read_in_time_in_proportion_to_them():
    """ "0" is a printf flag and was a width's first digit too: "%" and 24,000 zeros took 9 s
    (time growing with their square); a width still follows its flags."""
    import time

    start = time.perf_counter()
    assert placeholders("%" + "0" * 24_000 + "y") == []
    assert time.perf_counter() - start < 2
    found = placeholders("%05d %-010.2f %00d %10s %1$05d %(n)03d")
    assert [m.source for m in found] == ["%05d", "%-010.2f", "%00d", "%10s", "%1$05d", "%(n)03d"]


def test_mail_addresses_are_found_in_time_in_proportion_to_the_text():
    """Tried at every word boundary, each read to the end of its run of characters: 100,000
    characters of "a-a-" took 15 s (time growing with their square); a paragraph of a
    document is read whole for the spans it keeps."""
    import time

    start = time.perf_counter()
    assert placeholders("a-" * 50_000) == []
    assert time.perf_counter() - start < 2
    text = "an info@example.de! (a.b+c@x-y.co.uk) mailto:x@y.de, E-Mail @alice"
    assert [m.source for m in placeholders(text)] == [
        "info@example.de",
        "a.b+c@x-y.co.uk",
        "x@y.de",
    ]


def test_a_byte_order_mark_is_no_part_of_a_term_or_header(tmp_path):
    """Spreadsheets and Windows editors save UTF-8 with a BOM: it was read into "\ufeffde"."""
    (tmp_path / "g.tsv").write_text("\ufeffde\ten\nSchraube\tbolt\n", encoding="utf-8")
    assert Glossary.read(tmp_path / "g.tsv").terms("de", "en").targets == {"schraube": "bolt"}
    (tmp_path / "g.json").write_text('\ufeff{"de_en": {"Schraube": "bolt"}}', encoding="utf-8")
    assert Glossary.read(tmp_path / "g.json").terms("de", "en").targets == {"schraube": "bolt"}


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "g.tsv",
            "de\ten\nSchraube\tbolt\nMutter\tnut\nschraube\tscrew\n",
            r'g\.tsv: line 4: "schraube" -> "screw", but "Schraube" -> "bolt" already',
        ),
        (
            "g.json",
            '{"de_en": {"Schraube": "bolt", "Schraube": "screw"}}',
            r'g\.json: "Schraube" is given twice in one object',
        ),
        (
            "g.json",
            '{"de_en": {"Schraube": "bolt", "SCHRAUBE": "screw"}}',
            r'g\.json: "de_en": "SCHRAUBE" -> "screw", but "Schraube" -> "bolt" already',
        ),
        (
            "g.json",
            '{"de_en": {"Schraube": "bolt"}, "DE_EN": {"Schraube": "screw"}}',
            r'g\.json: "DE_EN": "Schraube" -> "screw", but "Schraube" -> "bolt" already',
        ),
    ],
)
def test_one_source_term_with_two_targets_is_an_error_naming_both(tmp_path, name, text, message):
    """The last one silently won (or, differing in case, whichever matching picked)."""
    (tmp_path / name).write_text(text)
    with pytest.raises(GlossaryError, match=message):
        Glossary.read(tmp_path / name).terms("de", "en")


def test_a_tsv_pair_with_two_targets_fails_only_where_it_is_used(tmp_path):
    """Two German terms for one English one are a good de -> en glossary; en -> de is
    ambiguous, and an error only when asked for; the same target twice is one term."""
    (tmp_path / "g.tsv").write_text("de\ten\nSchraube\tbolt\nBolzen\tbolt\nSchraube\tbolt\n")
    g = Glossary.read(tmp_path / "g.tsv")
    assert g.terms("de", "en").targets == {"schraube": "bolt", "bolzen": "bolt"}
    with pytest.raises(GlossaryError, match=r'line 3: "bolt" -> "Bolzen", but .* \(en_de\)'):
        g.terms("en", "de")


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("g.tsv", "de\ten\nStraße\tstreet\n".encode("latin-1"), r"g\.tsv: line 2: not UTF-8"),
        ("g.csv", b"de,en\nSchraube,bolt\n", r"g\.csv: .* CSV is not read: save it as TSV"),
        ("g.tbx", b'<?xml version="1.0"?><martif/>', r"g\.tbx: .* TBX/XML is not read"),
        ("g.tsv", b'de\ten\n"Schraube\tbolt\nMutter\t\n', r"g\.tsv: line 3, column 2: a term"),
    ],
)
def test_files_of_other_kinds_are_named_as_such(tmp_path, name, data, message):
    (tmp_path / name).write_bytes(data)
    with pytest.raises(GlossaryError, match=message):
        Glossary.read(tmp_path / name)


def test_tsv_lines_are_read_as_written(tmp_path):
    """A quote is part of a term (CSV quoting swallowed the lines after an opening quote into
    one term); trailing empty columns, as spreadsheets save them, are no columns."""
    text = 'de\ten\t\n"Kopf\t"head\t\n5" Rohr\t5" pipe\n'
    (tmp_path / "g.tsv").write_text(text)
    targets = Glossary.read(tmp_path / "g.tsv").terms("de", "en").targets
    assert targets == {'"kopf': '"head', '5" rohr': '5" pipe'}


def test_terms_match_whatever_the_texts_unicode_composition():
    """An "ä" may be one character (NFC) or "a" + U+0308 (NFD, as macOS writes file names):
    the same word either way, in the text and in the glossary."""
    nfc, nfd = "B\u00e4ckerei", "Ba\u0308ckerei"
    for term, text in ((nfc, nfd), (nfd, nfc)):
        assert [m.target for m in Terms({term: "bakery"}).find(f"Die {text} ist zu.")] == ["bakery"]


@pytest.mark.parametrize(("term", "text"), [("Maus", "MAU\u017f"), ("ist", "\u0130ST")])
def test_a_match_whose_lower_case_is_not_the_terms_still_finds_its_target(term, text):
    """re's case folding matches "ſ" to "s" and "İ" to "i", whose lower() differs: KeyError."""
    assert [m.target for m in Terms({term: "x"}).find(f"{text} da")] == ["x"]


@pytest.mark.parametrize(
    ("text", "spans"),
    [
        (
            "Hallo {{name}}, {{{raw}}} {% if x %} {{ user.name | upper }}",
            ["{{name}}", "{{{raw}}}", "{% if x %}", "{{ user.name | upper }}"],
        ),
        (
            "Datei %1$s von %2$d, %ld Bytes, %lu, %@ und %{count}",
            ["%1$s", "%2$d", "%ld", "%lu", "%@", "%{count}"],
        ),
        (
            "{user.name}, {0[key]} und {count, number}",
            ["{user.name}", "{0[key]}", "{count, number}"],
        ),
        (
            "Siehe https://example.com/a?b=1&c=2. Oder (www.example.de/x), an info@example.de!",
            ["https://example.com/a?b=1&c=2", "www.example.de/x", "info@example.de"],
        ),
        ("10 % der Summe, 50 % o., 100%sicher, E-Mail @alice, 5 $ mal %%", []),
    ],
)
def test_templates_positional_printf_urls_and_mail_addresses_are_kept_whole(text, spans):
    """{{name}} was kept as "{name}" inside braces that were translated away; %1$s, %ld,
    %@ and %{count} were not found at all, nor URLs and e-mail addresses."""
    assert [m.source for m in placeholders(text)] == spans


def test_a_multi_word_term_matches_whatever_whitespace_is_between_its_words():
    """A no-break space ("z. B.", "10 kg" are written with one) or a line break between the
    words of a term hid it."""
    terms = Terms({"z. B.": "e.g.", "neues Betriebssystem": "new OS"})
    text = "z.\u00a0B. ein neues\nBetriebssystem, kein neues  Betriebssystem."
    assert [m.target for m in terms.find(text)] == ["e.g.", "new OS", "new OS"]


def test_a_term_with_a_capital_whose_lower_case_is_longer_still_matches():
    """Lower-cased, "İstanbul" is "i̇stanbul" (an "i" and a dot above), which the text's
    "İstanbul" never matched."""
    assert [m.target for m in Terms({"İstanbul": "Istanbul"}).find("In İstanbul.")] == ["Istanbul"]
