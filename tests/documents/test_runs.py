"""What a paragraph's runs become in .docx and .pptx files, and what is written back, with
a translation made here (each word in capitals, aligned to itself) instead of a model's: line
breaks, tabs and fields stay points between the words they stood between, and each link's
runs keep their own words."""

import io

import pytest

from aiayn import documents

pytest.importorskip("docx")
pytest.importorskip("pptx")


def rewritten(data: bytes, name: str) -> tuple[list[str], bytes]:
    """The texts the model would get, and the file written back with each word in capitals."""
    opened = documents.read(data, name)
    sentences = documents.sentences(opened, lambda text: True)
    pairs = [(t.upper(), [(i, i) for i in range(len(t.split()))]) for t in sentences.texts]
    return sentences.texts, documents.save(opened, sentences, pairs, name)


def words(text: str) -> str:
    return " ".join(text.split())


def test_a_slide_line_break_and_field_stay_between_their_words():
    import pptx
    from lxml import etree

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])
    p = slide.shapes.title.text_frame.paragraphs[0]
    p.add_run().text = "Erste Zeile hier"
    p.add_line_break()
    p.add_run().text = "Zweite Zeile dort"
    drawing = "http://schemas.openxmlformats.org/drawingml/2006/main"
    field = etree.SubElement(
        p._p, f"{{{drawing}}}fld", id="{B6F15528-21DE-4FAA-801E-634DDDAF4B2B}", type="slidenum"
    )
    etree.SubElement(field, f"{{{drawing}}}t").text = "7"
    p.add_run().text = "Seite danach"
    out = io.BytesIO()
    presentation.save(out)

    texts, data = rewritten(out.getvalue(), "breaks.pptx")
    assert [words(t) for t in texts] == ["Erste Zeile hier Zweite Zeile dort Seite danach"]
    (paragraph,) = pptx.Presentation(io.BytesIO(data)).slides[0].shapes.title.text_frame.paragraphs
    first, rest = paragraph.text.split("\v")
    assert words(first) == "ERSTE ZEILE HIER"
    assert words(rest.replace("7", " 7 ")) == "ZWEITE ZEILE DORT 7 SEITE DANACH"  # a field
    kept = [etree.QName(c).localname for c in paragraph._p]
    assert [k for k in kept if k in ("r", "br", "fld")] == ["r", "br", "r", "fld", "r"]


def test_a_word_tab_and_line_break_stay_between_their_words():
    import docx

    document = docx.Document()
    paragraph = document.add_paragraph()
    run = paragraph.add_run("Name:\tWert eins")
    run.bold = True
    run.add_break()
    paragraph.add_run("Zeile zwei hier.").bold = True
    out = io.BytesIO()
    document.save(out)

    texts, data = rewritten(out.getvalue(), "breaks.docx")
    assert [words(t) for t in texts] == ["Name: Wert eins Zeile zwei hier."]
    (paragraph,) = docx.Document(io.BytesIO(data)).paragraphs
    first, rest = paragraph.text.split("\n")
    assert [words(part) for part in first.split("\t")] == ["NAME:", "WERT EINS"]
    assert words(rest) == "ZEILE ZWEI HIER."
    assert all(run.bold for run in paragraph.runs)


def test_adjacent_word_links_keep_their_own_words():
    """Twenty paragraphs of two links each: a link is known by its element, never by the
    id() of a proxy that lxml frees and reuses (which merged links, or split one)."""
    import docx
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    document = docx.Document()
    links = (("https://a.example/", ["erster ", "Link "]), ("https://b.example/", ["zweiter Link"]))
    for _ in range(20):
        paragraph = document.add_paragraph("Siehe ")
        for url, pieces in links:
            link = OxmlElement("w:hyperlink")
            link.set(qn("r:id"), paragraph.part.relate_to(url, RELATIONSHIP_TYPE.HYPERLINK, True))
            for piece in pieces:
                run = OxmlElement("w:r")
                text = OxmlElement("w:t")
                text.text = piece
                text.set(qn("xml:space"), "preserve")
                run.append(text)
                link.append(run)
            paragraph._p.append(link)
        paragraph.add_run(" und mehr.")
    out = io.BytesIO()
    document.save(out)

    from aiayn.documents.word import _key

    # the runs' keys, taken one after the other as the reader takes them: equal within a
    # link, different between two
    runs = list(document.paragraphs[0]._p.iter(qn("w:r")))
    keys = [_key(r) for r in runs]
    assert keys[1] == keys[2] and keys[2] != keys[3] and keys[0] != keys[1]

    texts, data = rewritten(out.getvalue(), "links.docx")
    assert [words(t) for t in texts] == ["Siehe erster Link zweiter Link und mehr."] * 20
    for paragraph in docx.Document(io.BytesIO(data)).paragraphs:
        first, second = paragraph.hyperlinks
        assert (first.address, words(first.text)) == ("https://a.example/", "ERSTER LINK")
        assert (second.address, words(second.text)) == ("https://b.example/", "ZWEITER LINK")
