"""What a translated document keeps besides its words: an e-book chapter's head and the
navigation document's landmarks, a Word field's result and a tracked change where they
stood, a catalogue message's line breaks and markup, a subtitle's lines; each checked with
the shipped model on a document built here with its format's library (or, where the
library cannot write the part, its XML)."""

import io
import zipfile

import pytest

import aiayn

pytest.importorskip("docx")


@pytest.fixture(scope="module")
def translator(shipped_copy):
    return aiayn.load(shipped_copy)


CHAPTER = (
    '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n'
    '<html xmlns="http://www.w3.org/1999/xhtml" lang="de"><head><title>Das Haus</title>'
    '<link rel="stylesheet" type="text/css" href="style.css"/></head>'
    '<body class="chapter" id="top"><h1>Das Haus</h1><p>Ich habe keine Zeit.</p></body></html>'
)
NAV = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">'
    "<head><title>Inhalt</title></head><body>"
    '<nav epub:type="toc" id="toc"><h1>Inhalt</h1><ol><li><a href="c1.xhtml">Das Haus</a></li>'
    '</ol></nav><nav epub:type="landmarks" hidden=""><ol><li>'
    '<a epub:type="bodymatter" href="c1.xhtml">Der Garten</a></li></ol></nav></body></html>'
)
OPF = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    '<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="uid">'
    '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="uid">x</dc:identifier>'
    "<dc:title>Das Buch</dc:title><dc:language>de</dc:language></metadata><manifest>"
    '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
    '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'
    '<item id="css" href="style.css" media-type="text/css"/>'
    '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/></manifest>'
    '<spine toc="ncx"><itemref idref="nav"/><itemref idref="c1"/></spine></package>'
)
NCX = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    '<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1"><head/>'
    "<docTitle><text>Das Buch</text></docTitle><navMap>"
    '<navPoint id="p1"><navLabel><text>Das Haus</text></navLabel><content src="c1.xhtml"/>'
    "</navPoint></navMap></ncx>"
)


def epub_as_written_by_an_editor() -> bytes:
    """An EPUB 3 as an editor writes it (not ebooklib): a chapter whose head links its
    stylesheet, a navigation document with landmarks."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip")
        archive.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:'
            'opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" '
            'media-type="application/oebps-package+xml"/></rootfiles></container>',
        )
        for member, text in (
            ("content.opf", OPF),
            ("c1.xhtml", CHAPTER),
            ("nav.xhtml", NAV),
            ("toc.ncx", NCX),
            ("style.css", "p { color: red }"),
        ):
            archive.writestr(f"OEBPS/{member}", text)
    return out.getvalue()


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {info.filename.rsplit("/", 1)[-1]: archive.read(info) for info in archive.infolist()}


def test_an_epub_chapter_keeps_its_head_and_the_navigation_its_landmarks(translator, tmp_path):
    from ebooklib import epub
    from lxml import etree

    source = tmp_path / "in.epub"
    source.write_bytes(epub_as_written_by_an_editor())
    out = translator.translate_file(source, tmp_path / "out.epub")
    written = members(out.read_bytes())
    chapter = etree.fromstring(written["c1.xhtml"])
    ns = {"x": "http://www.w3.org/1999/xhtml"}
    (link,) = chapter.findall("x:head/x:link", ns)
    assert link.get("href") == "style.css"
    (house,) = (t.text for t in translator.translate(["Das Haus"]))
    assert chapter.find("x:head/x:title", ns).text == house
    body = chapter.find("x:body", ns)
    assert (body.get("class"), body.get("id")) == ("chapter", "top")
    assert body.find("x:h1", ns).text == house
    nav = etree.fromstring(written["nav.xhtml"])
    kinds = [n.get("{http://www.idpf.org/2007/ops}type") for n in nav.iter("{*}nav")]
    assert kinds == ["toc", "landmarks"]
    assert [a.text for a in nav.iter("{*}a")] == [
        t.text for t in translator.translate(["Das Haus", "Der Garten"])
    ]
    assert written["style.css"] == b"p { color: red }"
    book = epub.read_epub(str(out))  # opens in ebooklib
    assert [link.title for link in book.toc] == [house]


W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def field(instruction: str, result: str) -> str:
    """A complex field as Word writes one: begin, instruction, separate, result, end."""
    return (
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        f'<w:r><w:instrText xml:space="preserve"> {instruction} </w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r>'
        f"<w:r><w:t>{result}</w:t></w:r>"
        '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
    )


def text(words: str) -> str:
    return f'<w:r><w:t xml:space="preserve">{words}</w:t></w:r>'


def docx_with_fields_and_changes() -> bytes:
    import docx
    from docx.oxml import parse_xml

    document = docx.Document()
    body = document.element.body
    for inner in (
        text("Seite ") + field("PAGE", "3") + text(" von ") + field("NUMPAGES", "5"),
        text("Heute ist ") + field('DATE \\@ "d. MMMM yyyy"', "27. November 2026") + text("."),
        text("Siehe ") + field('HYPERLINK "https://example.org/"', "die Seite") + text(" hier."),
        text("Der Hund ")
        + '<w:del w:id="1" w:author="A"><w:r><w:delText>schläft</w:delText></w:r></w:del>'
        + '<w:ins w:id="2" w:author="A"><w:r><w:t>spielt</w:t></w:r></w:ins>'
        + text("."),
        text("Seite ") + '<w:fldSimple w:instr=" PAGE ">' + text("7") + "</w:fldSimple>"
        + text(" ist gut."),
    ):  # fmt: skip
        body.insert(len(body) - 1, parse_xml(f"<w:p {W}>{inner}</w:p>"))
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_word_fields_and_tracked_changes_keep_their_text(translator, tmp_path):
    """A field's result (a page number, a date) stays in its field, as it was; a hyperlink
    field keeps translated words as its text; inserted words stay inside the insertion and
    deleted ones as they were (before, every run of a paragraph around them was merged into
    its first run, emptying the fields and the insertion)."""
    import docx
    from docx.oxml.ns import qn

    source = tmp_path / "in.docx"
    source.write_bytes(docx_with_fields_and_changes())
    out = docx.Document(translator.translate_file(source, tmp_path / "out.docx"))

    def results(p) -> list[str]:
        """Each complex field's result text, in order."""
        found, current, state = [], "", None
        for r in p.iter(qn("w:r")):
            mark = r.find(qn("w:fldChar"))
            kind = None if mark is None else mark.get(qn("w:fldCharType"))
            if kind == "separate":
                state, current = "result", ""
            elif kind == "end":
                found.append(current)
                state = None
            elif state == "result":
                current += "".join(t.text or "" for t in r.iter(qn("w:t")))
        return found

    pages, date, link, change, simple = (p._p for p in out.paragraphs)
    assert results(pages) == ["3", "5"]
    assert results(date) == ["27. November 2026"]
    (linked,) = results(link)
    assert linked.strip() and "die Seite" not in linked
    assert "".join(change.find(qn("w:del")).itertext()) == "schläft"
    assert "".join(change.find(qn("w:ins")).itertext()).strip()
    (kept,) = simple.findall(qn("w:fldSimple"))
    assert [t.text for t in kept.iter(qn("w:t"))] == ["7"]


def test_a_paragraph_without_a_full_stop_is_cut_reading_each_word_a_few_times():
    """A paragraph of 2 million characters and no sentence end is cut into pieces that fit
    the model reading each word a bounded number of times (before, each piece read the
    whole rest of the paragraph again, about log2 of it times: minutes of tokenizing)."""
    from aiayn.data.markup import Document
    from aiayn.documents import sentences
    from aiayn.documents.base import leaf

    class Opened:
        documents = [Document(leaf("Wort " * 400_000))]

    size = len("Wort " * 400_000)
    read = 0

    def fits(text: str) -> bool:
        nonlocal read
        read += len(text)
        assert read < 20 * size, "the paragraph is read again and again"
        return len(text.split()) <= 100

    cut = sentences(Opened(), fits)
    assert len(cut.texts) == 4000
    assert all(len(t.split()) == 100 for t in cut.texts)


def test_a_catalogue_message_keeps_its_line_breaks_and_markup(translator, tmp_path):
    """A message's inner line break stays a line break, its tags stay whole around the
    words translated from theirs (before, the break became a space and the tags went to the
    model as words, which came back mangled)."""
    import re

    polib = pytest.importorskip("polib")
    source = tmp_path / "in.po"
    source.write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        'msgid "<b>Der Hund</b> schläft.\\nDie Katze spielt."\nmsgstr ""\n\n'
        'msgid "Das ist ein <a href=\\"https://example.org/\\">gutes Buch</a>."\nmsgstr ""\n',
        encoding="utf-8",
    )
    out = polib.pofile(str(translator.translate_file(source, tmp_path / "out.po")))
    first, second = (entry.msgstr for entry in out if entry.msgid)
    assert first.count("\n") == 1
    assert re.fullmatch(r"<b>[^<>\s][^<>]*[^<>\s]</b>[^<>\n]*\n[^<>\n]+", first), first
    sentences = translator.translate(["Der Hund schläft.", "Die Katze spielt."])
    assert re.sub("<[^>]+>", "", first).split() == " ".join(t.text for t in sentences).split()
    assert re.fullmatch(r'[^<>]*<a href="https://example.org/">[^<>]+</a>[^<>]*', second), second


@pytest.mark.parametrize("tagged", [False, True])
def test_a_subtitle_keeps_its_lines_dialogue_dashes_and_position(translator, tmp_path, tagged):
    """Two speakers' lines stay two lines, each with its dash; a subtitle's two lines stay
    two; a positioning tag stays at the start (before, the lines were joined into one, the
    dashes and the tag went to the model, which dropped them)."""
    srt = pytest.importorskip("srt")
    dog = "<i>Der Hund</i> schläft." if tagged else "Der Hund schläft."
    source = tmp_path / "in.srt"
    source.write_text(
        f"1\n00:00:01,000 --> 00:00:02,000\n- Guten Tag.\n- {dog}\n\n"
        "2\n00:00:03,000 --> 00:00:04,500\n{\\an8}Die Katze spielt.\n\n"
        "3\n00:00:05,000 --> 00:00:06,000\nIch habe keine Zeit\nund kein Geld.\n",
        encoding="utf-8",
    )
    out = translator.translate_file(source, tmp_path / "out.srt")
    dialogue, top, two = srt.parse(out.read_text(encoding="utf-8"))
    first, second = dialogue.content.split("\n")
    good_day, dog_sleeps, cat = (
        t.text
        for t in translator.translate(["Guten Tag.", "Der Hund schläft.", "Die Katze spielt."])
    )
    assert first == f"- {good_day}"
    assert (
        second.startswith("- ")
        and " ".join(second.replace("<i>", "").replace("</i>", "").split()) == f"- {dog_sleeps}"
    )
    assert top.content == "{\\an8}" + cat
    assert len(two.content.split("\n")) == 2
    assert (dialogue.index, dialogue.start.total_seconds(), top.end.total_seconds()) == (1, 1, 4.5)


def test_note_marks_stay_and_points_keep_the_spacing_they_had(translator, tmp_path):
    """A note's mark (``<a>1</a>``, ``<sup>2</sup>``) is kept whole, against the word it was
    written against; a picture keeps its space on the side it had it; a Word tab gets no
    space before it (before, the model dropped the marks, and a space went before every
    point whatever the source had)."""
    import re

    import docx

    page = tmp_path / "in.html"
    page.write_text(
        '<p>Ich habe keine Zeit.<a href="#n1">1</a> Der Hund schläft<sup>2</sup> und die '
        'Katze spielt.</p><p><img src="x.png"> Guten Tag.</p>',
        encoding="utf-8",
    )
    out = translator.translate_file(page, tmp_path / "out.html").read_text(encoding="utf-8")
    assert re.search(r'\S<a href="#n1">1</a> \S', out), out
    assert re.search(r"\S<sup>2</sup> \S", out), out
    assert re.search(r'<p><img src="x.png"> \S', out), out

    document = docx.Document()
    document.add_paragraph("Der Hund schläft.\tDie Katze spielt.")
    source = tmp_path / "in.docx"
    document.save(source)
    (paragraph,) = docx.Document(
        translator.translate_file(source, tmp_path / "out.docx")
    ).paragraphs
    before_tab, after_tab = paragraph.text.split("\t")
    assert before_tab == before_tab.strip() and after_tab == after_tab.strip()
    assert before_tab and after_tab


def test_a_slide_chart_title_is_translated(translator, tmp_path):
    """A chart's title is text a reader sees on the slide (before, charts were skipped:
    their text lives in a part of their own)."""
    pptx = pytest.importorskip("pptx")
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[6])
    data = CategoryChartData()
    data.categories = ["Osten", "Westen"]
    data.add_series("Verkauf", (1.0, 2.0))
    chart = slide.shapes.add_chart(
        XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(1), Inches(4), Inches(3), data
    ).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Der Hund schläft."
    source = tmp_path / "in.pptx"
    presentation.save(source)
    out = pptx.Presentation(translator.translate_file(source, tmp_path / "out.pptx"))
    (frame,) = [s for s in out.slides[0].shapes if s.has_chart]
    (title,) = translator.translate(["Der Hund schläft."])
    assert frame.chart.chart_title.text_frame.text == title.text


def test_a_page_declaring_another_charset_is_labelled_utf8_as_written(translator, tmp_path):
    """The translation is written in UTF-8 (the model writes "’"): a page whose ``<meta>``
    said ISO-8859-1 says UTF-8 after (before, a browser read the UTF-8 bytes as Latin-1)."""
    page = tmp_path / "in.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="iso-8859-1"><meta http-equiv="Content-Type"'
        ' content="text/html; charset=iso-8859-1"><title>Das Haus</title></head><body>'
        "<p>Das ist ein gutes Buch.</p></body></html>",
        encoding="ascii",
    )
    out = translator.translate_file(page, tmp_path / "out.html").read_bytes().decode("utf-8")
    assert '<meta charset="utf-8">' in out
    assert 'content="text/html; charset=utf-8"' in out
    assert "iso-8859-1" not in out


def test_a_slide_number_field_stays_a_word_of_its_own(translator, tmp_path):
    """A slide's field (its number) is kept, with a space on each side as in the source
    (before, the space went before it and the number ran into the next word: "3from")."""
    pptx = pytest.importorskip("pptx")
    from lxml import etree

    drawing = "http://schemas.openxmlformats.org/drawingml/2006/main"
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[6])
    box = slide.shapes.add_textbox(0, 0, 100, 100)
    paragraph = box.text_frame.paragraphs[0]._p
    paragraph.getparent().replace(
        paragraph,
        etree.fromstring(
            f'<a:p xmlns:a="{drawing}"><a:r><a:t>Folie </a:t></a:r>'
            '<a:fld id="{B6F15528-21DE-4FAA-801E-634DDDAF4B2B}" type="slidenum"><a:t>3</a:t>'
            "</a:fld><a:r><a:t> von zehn Folien.</a:t></a:r></a:p>"
        ),
    )
    source = tmp_path / "in.pptx"
    presentation.save(source)
    out = pptx.Presentation(translator.translate_file(source, tmp_path / "out.pptx"))
    (shape,) = out.slides[0].shapes
    shown = "".join(t.text or "" for t in shape.text_frame.paragraphs[0]._p.iter(f"{{{drawing}}}t"))
    assert " 3 " in shown, shown


def test_an_epub_is_written_with_the_members_it_had(translator, tmp_path):
    """The package's folder and every member's name come back as they were, an item the
    package names "../style.css" too (before, ebooklib moved the package to EPUB/ and wrote
    that item as "EPUB/../style.css", a name that climbs out of its folder, which this
    reader, as others, refuses)."""
    data = epub_as_written_by_an_editor()
    moved = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(moved, "w") as target:
        for info in source.infolist():
            content = source.read(info)
            if info.filename == "OEBPS/style.css":
                info.filename = "style.css"
            if info.filename == "OEBPS/content.opf":
                content = content.replace(b'href="style.css"', b'href="../style.css"')
            target.writestr(info, content)
    source = tmp_path / "in.epub"
    source.write_bytes(moved.getvalue())
    out = translator.translate_file(source, tmp_path / "out.epub")
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        assert archive.read("style.css") == b"p { color: red }"
    assert names[0] == "mimetype"
    with zipfile.ZipFile(source) as archive:
        assert sorted(names) == sorted(archive.namelist())
    translator.translate_file(out, tmp_path / "again.epub")  # read again: no name refused


def test_only_a_short_inline_text_without_letters_is_a_note_mark():
    """A note's mark is told apart reading a few of the characters and elements an inline
    element holds, so elements nested hundreds deep around a long text are not each read
    whole (a 2 MB page 250 deep took 8 s to read so): a long number in bold is a text."""
    from aiayn.data.markup import parse

    (segment,) = parse("<p>Siehe<sup>12</sup> und <b>" + "1" * 40 + "</b> hier.</p>").segments
    assert [n.element.tag for n in segment.nodes if n.point] == ["sup"]


def test_html_too_crowded_to_write_back_is_refused_through_the_api(translator):
    """The HTML route refuses a paragraph whose elements times words pass the bound, naming
    it, before any memory is taken for it (2000 lines broken by <br> took 1.3 GB)."""
    from aiayn.data.markup import MarkupError

    with pytest.raises(MarkupError, match="html: a paragraph of 2000 words holds 2000 inline"):
        translator.translate_html(["<p>" + "Haus<br>" * 2000 + "</p>"])


def test_a_page_and_a_book_declare_the_language_they_are_written_in(translator, tmp_path):
    """An HTML page's and an e-book's declared language (``lang``, ``xml:lang``, the
    package's ``dc:language``) becomes the translation's (before, a German page translated
    into English still said it was German: a screen reader read it with a German voice)."""
    from lxml import etree

    page = tmp_path / "in.html"
    page.write_text(
        '<!DOCTYPE html><html lang="de"><body><p>Das Haus.</p><p lang="fr">Bonjour.</p>'
        "</body></html>",
        encoding="utf-8",
    )
    out = translator.translate_file(page, tmp_path / "out.html").read_text(encoding="utf-8")
    assert '<html lang="en">' in out and 'lang="fr"' in out

    book = tmp_path / "in.epub"
    book.write_bytes(epub_as_written_by_an_editor())
    written = members(translator.translate_file(book, tmp_path / "out.epub").read_bytes())
    assert etree.fromstring(written["c1.xhtml"]).get("lang") == "en"
    package = etree.fromstring(written["content.opf"])
    (language,) = package.iter("{http://purl.org/dc/elements/1.1/}language")
    assert language.text == "en"


def test_words_between_styled_runs_keep_a_style_when_every_word_had_one():
    """A paragraph whose every run is a styled ``<span>`` (LibreOffice writes them so): a
    target word aligned to none of them goes into the neighbour whose style most words
    had, not between them, unstyled (as it still does where the paragraph had plain text)."""
    from aiayn.data.markup import parse, serialize

    pairs = [(0, 0), (1, 1), (2, 3)]  # "is" aligned to nothing
    styled = parse('<p><span class="s">Der Hund</span> <b>schläft</b></p>')
    styled.write([("The dog is sleeping", pairs)])
    assert serialize(styled.root) == '<p><span class="s">The dog is</span> <b>sleeping</b></p>'
    plain = parse("<p>Der Hund <b>schläft</b></p>")
    plain.write([("The dog is sleeping", pairs)])
    assert serialize(plain.root) == "<p>The dog is <b>sleeping</b></p>"


def test_an_opendocument_word_between_styled_runs_takes_the_most_common_style(tmp_path):
    """In an .odt paragraph whose every run is a styled span, a word the translation put
    between two runs goes to the run whose style most words had (the spans' styles tell
    them apart: before, every span looked the same)."""
    from odf import style
    from odf.opendocument import OpenDocumentText, load
    from odf.text import P, Span

    from aiayn import documents

    document = OpenDocumentText()
    for name in ("T1", "T2"):
        look = style.Style(name=name, family="text")
        look.addElement(style.TextProperties(fontweight="bold" if name == "T2" else "normal"))
        document.automaticstyles.addElement(look)
    paragraph = P()
    paragraph.addElement(Span(stylename="T2", text="Heute"))
    paragraph.addText(" ")
    paragraph.addElement(Span(stylename="T1", text="schläft der Hund."))
    document.text.addElement(paragraph)
    out = io.BytesIO()
    document.write(out)
    opened = documents.read(out.getvalue(), "in.odt")
    sentences = documents.sentences(opened, lambda text: True)
    assert sentences.texts == ["Heute schläft der Hund."]
    pairs = [(0, 0), (2, 2), (3, 3), (1, 4)]  # "," aligned to nothing
    written = documents.save(opened, sentences, [("Today , the dog sleeps.", pairs)], "in.odt")
    target = tmp_path / "out.odt"
    target.write_bytes(written)
    spans = load(str(target)).getElementsByType(Span)
    texts = {s.getAttribute("stylename"): "".join(str(n) for n in s.childNodes) for s in spans}
    assert texts == {"T2": "Today", "T1": ", the dog sleeps."}


@pytest.mark.parametrize("declared, expected", [("", "en"), ("fr", "fr")])
def test_a_template_comes_back_naming_the_translation_s_language(
    translator, tmp_path, declared, expected
):
    """A template (.pot) names no language; filled, it names the translation's. A catalogue
    that names one keeps it (its msgstr are that language's)."""
    polib = pytest.importorskip("polib")
    source = tmp_path / "in.pot"
    source.write_text(
        f'msgid ""\nmsgstr ""\n"Language: {declared}\\n"\n'
        '"Content-Type: text/plain; charset=UTF-8\\n"\n\nmsgid "Der Hund schläft."\nmsgstr ""\n',
        encoding="utf-8",
    )
    out = polib.pofile(str(translator.translate_file(source, tmp_path / "out.pot")))
    assert out.metadata["Language"] == expected
