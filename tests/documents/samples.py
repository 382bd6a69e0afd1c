"""Small documents of every format, built with each format's own library: a paragraph with
bold, italic and a link, a table, a list, a header and a footer (where the format has them),
footnotes, notes and a table of contents; and ``texts``, each format's visible texts read back
with its library, in order, to compare a translation with."""

from __future__ import annotations

import io

# one sentence a text: a document's paragraph translates as /translate translates the sentence
BOLD = ("Das ist ein ", "gutes", " und ", "neues", " Buch mit ", "einem Bild", ".")
TABLE = ("Der Hund schläft.", "Die Katze spielt.")
ITEM = "Ich habe keine Zeit."
HEADER, FOOTER = "Guten Morgen.", "Vielen Dank."
NOTE = "Das Wetter ist schön."
TITLE = "Das Haus"


def paragraph_text() -> str:
    return "".join(BOLD)


def docx() -> bytes:
    import docx as python_docx
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    document = python_docx.Document()
    p = document.add_paragraph(BOLD[0])
    p.add_run(BOLD[1]).bold = True
    p.add_run(BOLD[2])
    p.add_run(BOLD[3]).italic = True
    p.add_run(BOLD[4])
    rel = document.part.relate_to("https://example.org/", RELATIONSHIP_TYPE.HYPERLINK, True)
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), rel)
    run = OxmlElement("w:r")
    text = OxmlElement("w:t")
    text.text = BOLD[5]
    run.append(text)
    link.append(run)
    p._p.append(link)
    p.add_run(BOLD[6])
    table = document.add_table(rows=1, cols=2)
    for cell, words in zip(table.rows[0].cells, TABLE, strict=True):
        cell.text = words
    document.add_paragraph(ITEM, style="List Bullet")
    section = document.sections[0]
    section.header.paragraphs[0].text = HEADER
    section.footer.paragraphs[0].text = FOOTER
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def docx_with_footnote() -> bytes:
    """``docx()`` with a footnotes part (python-docx writes none; Word keeps footnotes in
    word/footnotes.xml, named in the content types and the document's relationships)."""
    import zipfile

    footnotes = (
        f'<w:footnotes xmlns:w="{W}"><w:footnote w:id="1"><w:p><w:r><w:t>{NOTE}</w:t></w:r>'
        "</w:p></w:footnote></w:footnotes>"
    ).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(docx())) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            content = source.read(info)
            if info.filename == "[Content_Types].xml":
                content = content.replace(
                    b"</Types>",
                    b'<Override PartName="/word/footnotes.xml" ContentType="application/vnd.'
                    b'openxmlformats-officedocument.wordprocessingml.footnotes+xml"/></Types>',
                )
            if info.filename == "word/_rels/document.xml.rels":
                content = content.replace(
                    b"</Relationships>",
                    b'<Relationship Id="rIdNotes" Type="http://schemas.openxmlformats.org/'
                    b'officeDocument/2006/relationships/footnotes" Target="footnotes.xml"/>'
                    b"</Relationships>",
                )
            target.writestr(info, content)
        target.writestr("word/footnotes.xml", footnotes)
    return out.getvalue()


def docx_texts(data: bytes) -> list[str]:
    import docx as python_docx

    document = python_docx.Document(io.BytesIO(data))
    body = [p.text for p in document.paragraphs if p.text]
    cells = [c.text for row in document.tables[0].rows for c in row.cells]
    section = document.sections[0]
    return body[:1] + cells + body[1:] + [section.header.paragraphs[0].text,
                                          section.footer.paragraphs[0].text]  # fmt: skip


def pptx() -> bytes:
    import pptx as python_pptx
    from pptx.util import Inches

    presentation = python_pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[1])
    slide.shapes.title.text = TITLE
    frame = slide.placeholders[1].text_frame
    p = frame.paragraphs[0]
    for k, words in enumerate(BOLD):
        run = p.add_run()
        run.text = words
        run.font.bold = True if k == 1 else None
        run.font.italic = True if k == 3 else None
        if k == 5:
            run.hyperlink.address = "https://example.org/"
    frame.add_paragraph().text = ITEM
    shape = slide.shapes.add_table(1, 2, Inches(1), Inches(5), Inches(6), Inches(1))
    for k, words in enumerate(TABLE):
        shape.table.cell(0, k).text = words
    slide.notes_slide.notes_text_frame.text = NOTE
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def pptx_texts(data: bytes) -> list[str]:
    import pptx as python_pptx

    slide = python_pptx.Presentation(io.BytesIO(data)).slides[0]
    out = []
    for shape in slide.shapes:
        if shape.has_text_frame:
            out += [p.text for p in shape.text_frame.paragraphs if p.text]
        if shape.has_table:
            out += [c.text for c in shape.table.iter_cells()]
    return out + [slide.notes_slide.notes_text_frame.text]


def _odf(document, body) -> bytes:
    from odf import table, text
    from odf.style import Footer, Header, MasterPage, PageLayout, Style, TextProperties

    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    italic = Style(name="Italic", family="text")
    italic.addElement(TextProperties(fontstyle="italic"))
    document.automaticstyles.addElement(bold)
    document.automaticstyles.addElement(italic)
    p = text.P(text=BOLD[0])
    p.addElement(text.Span(stylename=bold, text=BOLD[1]))
    p.addText(BOLD[2])
    p.addElement(text.Span(stylename=italic, text=BOLD[3]))
    p.addText(BOLD[4])
    p.addElement(text.A(href="https://example.org/", text=BOLD[5]))
    p.addText(BOLD[6])
    body.addElement(p)
    grid = table.Table(name="T")
    grid.addElement(table.TableColumn(numbercolumnsrepeated=2))
    row = table.TableRow()
    grid.addElement(row)
    for words in TABLE:
        cell = table.TableCell()
        cell.addElement(text.P(text=words))
        row.addElement(cell)
    body.addElement(grid)
    items = text.List()
    item = text.ListItem()
    item.addElement(text.P(text=ITEM))
    items.addElement(item)
    body.addElement(items)
    layout = PageLayout(name="pm1")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Standard", pagelayoutname=layout)
    header, footer = Header(), Footer()
    header.addElement(text.P(text=HEADER))
    footer.addElement(text.P(text=FOOTER))
    master.addElement(header)
    master.addElement(footer)
    document.masterstyles.addElement(master)
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def odt() -> bytes:
    from odf.opendocument import OpenDocumentText

    document = OpenDocumentText()
    return _odf(document, document.text)


def odp() -> bytes:
    from odf.draw import Frame, Page, TextBox
    from odf.opendocument import OpenDocumentPresentation
    from odf.style import MasterPage, PageLayout

    document = OpenDocumentPresentation()
    layout = PageLayout(name="slides")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Slides", pagelayoutname=layout)
    document.masterstyles.addElement(master)
    page = Page(masterpagename=master)
    document.presentation.addElement(page)
    frame = Frame(width="20cm", height="10cm", x="1cm", y="1cm")
    page.addElement(frame)
    box = TextBox()
    frame.addElement(box)
    return _odf(document, box)


def odf_texts(data: bytes) -> list[str]:
    from odf import teletype, text
    from odf.opendocument import load

    document = load(io.BytesIO(data))
    return [teletype.extractText(p) for p in document.getElementsByType(text.P)]


def epub() -> bytes:
    from ebooklib import epub as ebook

    book = ebook.EpubBook()
    book.set_identifier("aiayn-test")
    book.set_title(TITLE)
    book.set_language("de")
    chapter = ebook.EpubHtml(title=TITLE, file_name="chapter.xhtml", lang="de")
    chapter.content = (
        f"<html><body><h1>{TITLE}</h1><p>{BOLD[0]}<b>{BOLD[1]}</b>{BOLD[2]}<i>{BOLD[3]}</i>"
        f"{BOLD[4]}<a href='https://example.org/'>{BOLD[5]}</a>{BOLD[6]}</p>"
        f"<table><tr><td>{TABLE[0]}</td><td>{TABLE[1]}</td></tr></table>"
        f"<ul><li>{ITEM}</li></ul></body></html>"
    )
    book.add_item(chapter)
    book.toc = (ebook.Link("chapter.xhtml", NOTE, "chapter"),)
    book.add_item(ebook.EpubNcx())
    book.add_item(ebook.EpubNav())
    book.spine = ["nav", chapter]
    out = io.BytesIO()
    ebook.write_epub(out, book)
    return out.getvalue()


def epub_texts(data: bytes) -> list[str]:
    import ebooklib
    from ebooklib import epub as ebook
    from lxml import etree

    book = ebook.read_epub(io.BytesIO(data))
    out = []
    for item in book.get_items_of_type(ebooklib.ITEM_DOCUMENT):
        if isinstance(item, ebook.EpubNav):
            continue
        root = etree.fromstring(item.get_content())
        for element in root.iter("{*}h1", "{*}p", "{*}td", "{*}li"):
            out.append("".join(element.itertext()))
    return out + [link.title for link in book.toc]


def html() -> bytes:
    return (
        f"<!doctype html><html><head><title>{TITLE}</title></head><body>"
        f"<p>{BOLD[0]}<b>{BOLD[1]}</b>{BOLD[2]}<i>{BOLD[3]}</i>{BOLD[4]}"
        f"<a href='https://example.org/'>{BOLD[5]}</a>{BOLD[6]}</p>"
        f"<table><tr><td>{TABLE[0]}</td><td>{TABLE[1]}</td></tr></table>"
        f"<ul><li>{ITEM}</li></ul><footer>{FOOTER}</footer></body></html>"
    ).encode()


def html_texts(data: bytes) -> list[str]:
    from aiayn.data.markup import parse

    return [s.text for s in parse(data.decode()).segments]


def srt() -> bytes:
    return (
        f"1\n00:00:01,000 --> 00:00:03,000\n{BOLD[0]}<b>{BOLD[1]}</b>{BOLD[2]}"
        f"<i>{BOLD[3]}</i>{''.join(BOLD[4:])}\n\n"
        f"2\n00:00:04,000 --> 00:00:06,500\n{TABLE[0]}\n\n"
        f"3\n00:00:07,000 --> 00:00:09,000\n{ITEM}\n"
    ).encode()


def srt_texts(data: bytes) -> list[str]:
    import re

    import srt as subrip

    return [re.sub(r"<[^>]+>", "", s.content) for s in subrip.parse(data.decode())]


def txt() -> bytes:
    return f"{paragraph_text()}\n\n  {TABLE[0]}\r\n{ITEM}\n".encode()


def txt_texts(data: bytes) -> list[str]:
    return [line.strip() for line in data.decode().splitlines() if line.strip()]


# extension: (build, read the texts back)
FORMATS = {
    ".txt": (txt, txt_texts),
    ".html": (html, html_texts),
    ".srt": (srt, srt_texts),
    ".docx": (docx, docx_texts),
    ".pptx": (pptx, pptx_texts),
    ".odt": (odt, odf_texts),
    ".odp": (odp, odf_texts),
    ".epub": (epub, epub_texts),
}
