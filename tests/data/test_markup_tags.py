"""A caller's rules for its tags (``Tags``: DeepL's splitting_tags, non_splitting_tags,
ignore_tags, outline_detection) over the HTML rules, and XML fragments read and written back
(``aiayn.data.markup.xml``)."""

import pytest

from aiayn.data.markup import MarkupError, Tags, parse
from aiayn.data.markup import xml as markup_xml

pytest.importorskip("html5lib")
pytest.importorskip("defusedxml")


def upper(document) -> str:
    """``document`` written back with each sentence in capitals, word i aligned to word i."""
    return document.render(
        [(s.text.upper(), [(i, i) for i in range(len(s.words))]) for s in document.segments]
    )


def texts(document) -> list[str]:
    return [s.text for s in document.segments]


def test_an_xml_fragment_keeps_its_tags_and_its_text_at_the_top():
    document = markup_xml.parse("Press <b>OK</b> to <i>save</i> it.<br/> Done.")
    assert texts(document) == ["Press OK to save it. Done."]
    assert upper(document) == "PRESS <b>OK</b> TO <i>SAVE</i> IT.<br/>DONE."


def test_outline_detection_splits_at_elements_with_no_text_beside_them():
    text = "<doc><p>Hello <b>world</b>.</p><p>Second one.</p></doc>"
    assert texts(markup_xml.parse(text)) == ["Hello world.", "Second one."]
    no_outline = Tags(xml=True, outline=False)
    assert texts(markup_xml.parse(text, tags=no_outline)) == ["Hello world.Second one."]
    splitting = Tags(xml=True, outline=False, splitting=frozenset({"p"}))
    assert texts(markup_xml.parse(text, tags=splitting)) == ["Hello world.", "Second one."]
    never = Tags(xml=True, non_splitting=frozenset({"p"}))
    assert texts(markup_xml.parse(text, tags=never)) == ["Hello world.Second one."]


def test_an_inline_element_holding_only_elements_stays_inline():
    document = markup_xml.parse("<p>Text <b><i>bold italic</i></b> end.</p>")
    assert texts(document) == ["Text bold italic end."]
    assert upper(document) == "<p>TEXT <b><i>BOLD ITALIC</i></b> END.</p>"


def test_an_ignored_element_is_kept_whole_and_spaced_as_a_word():
    tags = Tags(xml=True, ignored=frozenset({"x"}))
    document = markup_xml.parse('Press <x id="1"></x> and <x id="2">kein Wort</x> now.', tags=tags)
    assert texts(document) == ["Press and now."]
    assert upper(document) == 'PRESS <x id="1"></x> AND <x id="2">kein Wort</x> NOW.'


def test_elements_written_empty_come_back_so():
    document = markup_xml.parse('A <x id="1"/> b <y></y> c.')
    assert upper(document) == 'A<x id="1"/> B<y></y> C.'


def test_html_rules_with_a_callers_tags():
    page = "<p>Eins <span>zwei</span> drei.</p><div>vier</div>"
    assert texts(parse(page)) == ["Eins zwei drei.", "vier"]
    assert texts(parse(page, tags=Tags(splitting=frozenset({"span"})))) == [
        "Eins", "zwei", "drei.", "vier",
    ]  # fmt: skip
    assert texts(parse(page, tags=Tags(ignored=frozenset({"span"})))) == ["Eins drei.", "vier"]
    kept = upper(parse("<p>Eins <code>x = 1</code> drei.</p>"))
    assert kept == "<p>EINS <code>x = 1</code> DREI.</p>"  # the HTML rules, as before


@pytest.mark.parametrize(
    "text, where",
    [
        ("<a>unclosed", "at its end: .*mismatched tag: an element left open"),
        ("<a>\n<b></a>", "line 2, column 6"),
        ("a &nbsp; b", "undefined entity"),
        ('<!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>', "not well-formed"),
    ],
)
def test_xml_that_is_not_well_formed_is_refused_naming_where(text, where):
    with pytest.raises(MarkupError, match=where):
        markup_xml.parse(text, "text[0]")


def test_a_declaration_stays_at_the_head():
    document = markup_xml.parse('<?xml version="1.0"?><doc><p>Hallo.</p></doc>')
    assert upper(document) == '<?xml version="1.0"?><doc><p>HALLO.</p></doc>'


def test_a_segment_without_a_letter_is_left_as_it_is():
    from aiayn.data.markup import read

    sentences = read(
        ["<p>2024</p><p>Ja.</p>"], ["text[0]"], lambda text: True,
        translatable=lambda text: any(c.isalpha() for c in text),
    )  # fmt: skip
    assert sentences.texts == ["Ja."]
    assert sentences.render([("YES.", [(0, 0)])]) == ["<p>2024</p><p>YES.</p>"]
